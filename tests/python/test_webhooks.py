"""verify_webhook: the Standard Webhooks test vector, and real webhooks delivered to a local receiver."""

from __future__ import annotations

import contextlib
import gc
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType

import pytest

import coinorder

# The Standard Webhooks specification's test vector.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HEADERS = {
    "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
BODY = b'{"test": 2432232314}'
NOW = 1614265330


def test_the_test_vector_verifies() -> None:
    assert coinorder.verify_webhook(SECRET, HEADERS, BODY, now=NOW) == {"test": 2432232314}


def test_body_as_str_and_headers_in_any_case_and_any_mapping() -> None:
    upper = {name.title(): value for name, value in HEADERS.items()}
    assert coinorder.verify_webhook(SECRET, upper, BODY.decode(), now=NOW) == {"test": 2432232314}
    assert coinorder.verify_webhook(SECRET, MappingProxyType(HEADERS), BODY, now=NOW) == {"test": 2432232314}


def test_headers_not_a_mapping_or_no_body_is_a_type_error() -> None:
    # (name, value) pairs are headers too, as for handle.
    assert coinorder.verify_webhook(SECRET, list(HEADERS.items()), BODY, now=NOW) == {"test": 2432232314}
    with pytest.raises(TypeError, match="headers: must be a mapping"):
        coinorder.verify_webhook(SECRET, "webhook-id: x", BODY, now=NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="body: must be bytes or str"):
        coinorder.verify_webhook(SECRET, HEADERS, None, now=NOW)  # type: ignore[arg-type]


def test_within_the_five_minute_tolerance() -> None:
    assert coinorder.verify_webhook(SECRET, HEADERS, BODY, now=NOW + 299) == {"test": 2432232314}
    assert coinorder.verify_webhook(SECRET, HEADERS, BODY, now=NOW - 299) == {"test": 2432232314}


def test_one_of_several_signatures_may_match() -> None:
    rotated = dict(HEADERS, **{"webhook-signature": "v1,bm90IHRoaXMgb25l " + HEADERS["webhook-signature"]})
    assert coinorder.verify_webhook(SECRET, rotated, BODY, now=NOW) == {"test": 2432232314}


@pytest.mark.parametrize(
    ("secret", "headers", "body", "now"),
    [
        pytest.param(SECRET, HEADERS, b'{"test": 2432232315}', NOW, id="tampered body"),
        pytest.param(SECRET, HEADERS, BODY + b" ", NOW, id="extra byte"),
        pytest.param(SECRET, HEADERS, BODY, NOW + 301, id="stale now"),
        pytest.param(SECRET, HEADERS, BODY, NOW - 301, id="future timestamp"),
        pytest.param(SECRET, HEADERS, BODY, None, id="real clock"),
        pytest.param("whsec_" + "A" * 32, HEADERS, BODY, NOW, id="other secret"),
        pytest.param(SECRET, dict(HEADERS, **{"webhook-id": "msg_other"}), BODY, NOW, id="other id"),
        pytest.param(SECRET, dict(HEADERS, **{"webhook-timestamp": "1614265331"}), BODY, NOW, id="other timestamp"),
        pytest.param(SECRET, dict(HEADERS, **{"webhook-timestamp": "soon"}), BODY, NOW, id="bad timestamp"),
        pytest.param(SECRET, dict(HEADERS, **{"webhook-signature": "v2,abc"}), BODY, NOW, id="other version"),
        pytest.param(
            SECRET, {k: v for k, v in HEADERS.items() if k != "webhook-signature"}, BODY, NOW, id="no signature"
        ),
        pytest.param(SECRET, {k: v for k, v in HEADERS.items() if k != "webhook-id"}, BODY, NOW, id="no id"),
        pytest.param(SECRET, {}, BODY, NOW, id="no headers"),
    ],
)
def test_verification_failures(secret: str, headers: dict[str, str], body: bytes, now: int | None) -> None:
    with pytest.raises(coinorder.WebhookVerificationError) as caught:
        coinorder.verify_webhook(secret, headers, body, now=now)
    error = caught.value
    assert isinstance(error, coinorder.Error)
    assert (error.error_code, error.http_status) == ("SIGNATURE_INVALID", 400)
    assert str(error) == error.message


@dataclass
class Receiver:
    """A local HTTP server that records every webhook it gets and answers 204."""

    url: str
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@contextlib.contextmanager
def receiving(answer_after: float = 0.0) -> Iterator[Receiver]:
    """A local receiver that records every webhook and answers 204, `answer_after`
    seconds later; stopped at the end of the block."""
    received: list[tuple[dict[str, str], bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            time.sleep(answer_after)
            received.append(({name: value for name, value in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}/hooks", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


def test_a_delivered_webhook_verifies_with_the_keys_secret(svc: coinorder.Service, receiver: Receiver) -> None:
    key = svc.create_key(1, webhook_url=receiver.url)
    merchant = svc.authenticate(key.plain_key)
    created = svc.create_order(merchant, currency="USD", amount=Decimal("19.99"), title="T-shirt")
    paid = svc.simulate(created.order.order_id, "pay")
    assert paid.order.status == "PAID"

    report = svc.deliver_due()
    assert (report.attempted, report.delivered, report.retrying, report.failed) == (1, 1, 0, 0)
    (headers, body) = receiver.received[0]
    assert len(receiver.received) == 1
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= {name.lower() for name in headers}

    payload = coinorder.verify_webhook(key.webhook_secret, headers, body)
    assert payload["type"] == "order.paid"
    assert payload["data"]["order"]["order_id"] == created.order.order_id
    assert payload["data"]["order"]["status"] == "PAID"
    assert payload["data"]["previous_status"] == "NEW"
    assert payload["data"]["sequence"] == 1
    # Money is exact: the amounts come back as Decimal, equal to what was ordered.
    assert payload["data"]["order"]["price_amount"] == Decimal("19.99")
    assert isinstance(payload["data"]["order"]["price_amount"], Decimal)
    assert payload["data"]["invoice"]["amount"] == created.invoice.amount
    assert payload == json.loads(body, parse_float=Decimal)
    lower = {name.lower(): value for name, value in headers.items()}
    assert lower["webhook-id"] == paid.events[0].event_id

    # The same delivery fails verification once tampered with, or with another key's secret.
    with pytest.raises(coinorder.WebhookVerificationError):
        coinorder.verify_webhook(key.webhook_secret, headers, body.replace(b"PAID", b"FAID"))
    with pytest.raises(coinorder.WebhookVerificationError):
        coinorder.verify_webhook(svc.create_key(2).webhook_secret, headers, body)
    assert svc.deliver_due().attempted == 0  # delivered once, not again


def test_rotated_secret_signs_later_webhooks(svc: coinorder.Service, receiver: Receiver) -> None:
    key = svc.create_key(1, webhook_url=receiver.url)
    merchant = svc.authenticate(key.plain_key)
    new_secret = svc.rotate_key_webhook_secret(key.key.id)
    order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
    svc.simulate(order_id, "cancel")
    assert svc.deliver_due().delivered == 1
    (headers, body) = receiver.received[0]
    assert coinorder.verify_webhook(new_secret, headers, body)["type"] == "order.cancelled"
    with pytest.raises(coinorder.WebhookVerificationError):
        coinorder.verify_webhook(key.webhook_secret, headers, body)


def test_a_rotation_keeping_the_old_secret_signs_with_both(svc: coinorder.Service, receiver: Receiver) -> None:
    key = svc.create_key(1, webhook_url=receiver.url)
    merchant = svc.authenticate(key.plain_key)
    new_secret = svc.rotate_key_webhook_secret(key.key.id, keep_old_for=3600)
    order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
    svc.simulate(order_id, "cancel")
    assert svc.deliver_due().delivered == 1
    (headers, body) = receiver.received[0]
    signatures = {name.lower(): value for name, value in headers.items()}["webhook-signature"]
    assert len(signatures.split(" ")) == 2, signatures
    for secret in (new_secret, key.webhook_secret):
        assert coinorder.verify_webhook(secret, headers, body)["type"] == "order.cancelled"
    with pytest.raises(coinorder.ParametersMissing, match=r"keep_old_for: at most 2592000 seconds \(30 days\)"):
        svc.rotate_key_webhook_secret(key.key.id, keep_old_for=30 * 24 * 3600 + 1)
    with pytest.raises(TypeError, match="keep_old_for: must be an int"):
        svc.rotate_key_webhook_secret(key.key.id, keep_old_for=1.5)  # type: ignore[arg-type]


def test_the_orders_webhook_url_wins_over_the_keys(svc: coinorder.Service, receiver: Receiver) -> None:
    key = svc.create_key(1, webhook_url="http://127.0.0.1:9/never")
    merchant = svc.authenticate(key.plain_key)
    order_id = svc.create_order(merchant, currency="USD", amount=5, webhook_url=receiver.url).order.order_id
    svc.simulate(order_id, "partial")
    svc.simulate(order_id, "pay")
    # Each order's events go out in sequence: the second waits for the first's attempt.
    delivered = [svc.deliver_due().delivered for _ in range(3)]
    assert sum(delivered) == 2 and delivered[-1] == 0
    types = [coinorder.verify_webhook(key.webhook_secret, h, b)["type"] for h, b in receiver.received]
    assert types == ["order.pending", "order.paid"]


def test_redeliver_sends_a_delivered_event_again_with_the_same_id(svc: coinorder.Service, receiver: Receiver) -> None:
    key = svc.create_key(1, webhook_url=receiver.url)
    merchant = svc.authenticate(key.plain_key)
    order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
    (event,) = svc.simulate(order_id, "cancel").events
    assert svc.deliver_due().delivered == 1
    assert svc.deliver_due().attempted == 0  # delivered: nothing due

    svc.redeliver(event.event_id)
    assert svc.deliver_due().delivered == 1
    assert len(receiver.received) == 2
    first, again = ({name.lower(): value for name, value in headers.items()} for headers, _ in receiver.received)
    assert first["webhook-id"] == again["webhook-id"] == event.event_id
    assert receiver.received[0][1] == receiver.received[1][1]  # the same body
    assert coinorder.verify_webhook(key.webhook_secret, receiver.received[1][0], receiver.received[1][1])

    (delivery,) = svc.event_deliveries(order_id)
    assert isinstance(delivery, coinorder.EventDelivery)
    assert delivery.event.event_id == event.event_id
    assert delivery.state == "delivered" and delivery.delivered_at is not None
    assert delivery.next_attempt_at is None and delivery.last_error is None
    assert len(delivery.log) == 2  # the first schedule's attempt, then the redelivery's
    for attempt in delivery.log:
        assert isinstance(attempt, coinorder.WebhookAttempt)
        assert (attempt.attempt, attempt.url, attempt.status, attempt.error) == (1, receiver.url, 204, None)
        assert attempt.latency_ms >= 0
    assert delivery.to_dict()["log"][0]["status"] == 204
    with pytest.raises(coinorder.OrderNotValid):
        svc.event_deliveries("00000000-0000-4000-8000-000000000000")

    with pytest.raises(coinorder.EventNotFound) as caught:
        svc.redeliver("msg_doesnotexist")
    assert caught.value.error_code == "EVENT_NOT_FOUND"
    assert caught.value.http_status == 400


def test_workers_send_webhooks_and_expire_orders_without_host_loops(db_path: str, receiver: Receiver) -> None:
    with coinorder.Service.open(db_path, "sandbox", rate_limit=0, invoice_ttl=1) as svc:
        key = svc.create_key(1, webhook_url=receiver.url)
        merchant = svc.authenticate(key.plain_key)
        order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
        assert not svc.workers_running
        svc.start_workers(interval=0.05)
        assert svc.workers_running
        with pytest.raises(ValueError, match="already running"):
            svc.start_workers()
        # Nobody reads the order: the expiry worker moves it, the delivery worker sends it.
        deadline = time.monotonic() + 10
        while not receiver.received and time.monotonic() < deadline:
            time.sleep(0.05)
        svc.stop_workers()
        assert not svc.workers_running
        assert len(receiver.received) == 1
        headers, body = receiver.received[0]
        payload = coinorder.verify_webhook(key.webhook_secret, headers, body)
        assert (payload["type"], payload["data"]["order"]["order_id"]) == ("order.expired", order_id)
        svc.stop_workers()  # nothing running: fine
        for bad, error in [(0, coinorder.ParametersMissing), (3601, coinorder.ParametersMissing), (True, TypeError)]:
            with pytest.raises(error):
                svc.start_workers(interval=bad)
        svc.start_workers()
    # close() stopped them.
    assert not svc.workers_running


def test_dropping_a_service_with_workers_does_not_hold_the_interpreter(db_path: str) -> None:
    # The receiver is a Python thread of this process: it needs the GIL to answer. A
    # dropped (not closed) service must not wait for the webhook on its way while it
    # holds the GIL, or the two wait for each other until the webhook times out (30 s).
    with receiving(answer_after=0.5) as receiver:  # still answering when the service is dropped
        svc = coinorder.Service.open(db_path, "sandbox", rate_limit=0, webhook_timeout_secs=30)
        key = svc.create_key(1, webhook_url=receiver.url)
        merchant = svc.authenticate(key.plain_key)
        order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
        svc.simulate(order_id, "pay")
        svc.start_workers(interval=0.05)
        deadline = time.monotonic() + 10
        while svc.event_deliveries(order_id)[0].attempts == 0:
            assert time.monotonic() < deadline, "the worker never sent the webhook"
            time.sleep(0.01)
        started = time.monotonic()
        del svc
        gc.collect()
        dropped_in = time.monotonic() - started
        deadline = time.monotonic() + 10
        while not receiver.received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert receiver.received, "the receiver could answer"
        assert dropped_in < 15, f"the drop waited {dropped_in:.1f} s for the webhook's timeout"


def test_a_child_forked_after_start_workers_closes_and_exits_cleanly(db_path: str) -> None:
    if sys.platform == "win32" or not hasattr(os, "fork"):
        pytest.skip("no fork here")
    script = textwrap.dedent(
        """
        import os, sys, coinorder
        svc = coinorder.Service.open(sys.argv[1], "sandbox", rate_limit=0)
        svc.start_workers(interval=0.05)
        child = os.fork()
        if child == 0:
            # The workers' threads are the parent's: none runs here, and closing (or
            # simply exiting) must not try to join them.
            assert not svc.workers_running
            svc.close()
            sys.exit(0)
        _, status = os.waitpid(child, 0)
        assert svc.workers_running
        svc.close()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run([sys.executable, "-c", script, db_path], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "panic" not in done.stderr.lower(), done.stderr
