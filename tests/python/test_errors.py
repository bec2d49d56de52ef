"""Every exception class, each raised by a real failure, with its code, status and message."""

from __future__ import annotations

import base64
import hashlib
import hmac
import pickle
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, ContextManager

import pytest

import coinorder

ERROR_CLASSES: list[tuple[type[coinorder.Error], str, int]] = [
    (coinorder.ParametersMissing, "PARAMETERS_MISSING", 400),
    (coinorder.ApiLimitExceeded, "API_LIMIT_EXCEEDED", 400),
    (coinorder.AuthenticationFailed, "AUTHENTICATION_FAILED", 400),
    (coinorder.Unauthorized, "Unauthorized", 401),
    (coinorder.OrderNotValid, "ORDER_NOT_VALID", 400),
    (coinorder.OrderDuplicate, "ORDER_DUPLICATE", 400),
    (coinorder.OrderStateInvalid, "ORDER_STATE_INVALID", 400),
    (coinorder.KeyNotFound, "KEY_NOT_FOUND", 400),
    (coinorder.PaymentNotFound, "PAYMENT_NOT_FOUND", 400),
    (coinorder.NotFound, "Not Found", 404),
    (coinorder.InternalError, "InternalServerError", 500),
    (coinorder.WebhookVerificationError, "SIGNATURE_INVALID", 400),
    (coinorder.ServiceUnavailable, "ServiceUnavailable", 503),
    (coinorder.EventNotFound, "EVENT_NOT_FOUND", 400),
]


def check(error: coinorder.Error, cls: type[coinorder.Error]) -> None:
    """The raised error is exactly its class, with that class's code and status."""
    (code, status) = next((code, status) for c, code, status in ERROR_CLASSES if c is cls)
    assert type(error) is cls
    assert isinstance(error, coinorder.Error) and isinstance(error, Exception)
    assert error.error_code == code
    assert error.http_status == status
    assert isinstance(error.message, str) and error.message
    assert str(error) == error.message


def test_the_hierarchy() -> None:
    assert issubclass(coinorder.Error, Exception)
    assert len({cls for cls, _, _ in ERROR_CLASSES}) == 14
    for cls, _, _ in ERROR_CLASSES:
        assert issubclass(cls, coinorder.Error)
        assert cls is not coinorder.Error


def test_parameters_missing(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.create_order(merchant, currency="USD", amount=0)
    check(caught.value, coinorder.ParametersMissing)
    assert "amount" in caught.value.message
    assert caught.value.message == "amount: must be greater than 0"


def test_api_limit_exceeded_for_a_long_title(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    with pytest.raises(coinorder.ApiLimitExceeded) as caught:
        svc.create_order(merchant, currency="USD", amount=1, title="t" * 201)
    check(caught.value, coinorder.ApiLimitExceeded)
    assert "title" in caught.value.message


def test_api_limit_exceeded_for_the_rate_limit(tmp_path: Path) -> None:
    with coinorder.Service.open(str(tmp_path / "limited.db"), rate_limit=1, rate_burst=1) as svc:
        key = svc.create_key(1).plain_key
        svc.authenticate(key)
        with pytest.raises(coinorder.ApiLimitExceeded) as caught:
            svc.authenticate(key)
        check(caught.value, coinorder.ApiLimitExceeded)
        # What the HTTP API sends as Retry-After, for a host that answers it itself.
        assert caught.value.retry_after == 1
        again = pickle.loads(pickle.dumps(caught.value))
        assert (type(again), again.message, again.retry_after) == (coinorder.ApiLimitExceeded, caught.value.message, 1)
        with pytest.raises(coinorder.ParametersMissing) as refused:
            svc.create_key(-1)
        assert refused.value.retry_after is None


def test_service_unavailable_while_another_process_holds_the_write_lock(
    tmp_path: Path, hold_write_lock: Callable[[str], ContextManager[None]]
) -> None:
    path = str(tmp_path / "locked.db")
    with coinorder.Service.open(path, busy_timeout_ms=200) as svc:
        key = svc.create_key(1).plain_key
        merchant = svc.authenticate(key)
        with hold_write_lock(path):
            with pytest.raises(coinorder.ServiceUnavailable) as caught:
                svc.create_order(merchant, currency="USD", amount=1)
            check(caught.value, coinorder.ServiceUnavailable)
            assert caught.value.retry_after == 1
            # Reads go on while the lock is held.
            assert svc.list_orders(merchant).orders == []
        svc.create_order(merchant, currency="USD", amount=1)


def test_reads_of_overdue_orders_answer_while_another_process_holds_the_write_lock(
    tmp_path: Path, hold_write_lock: Callable[[str], ContextManager[None]]
) -> None:
    # A read moves an overdue order only if the writer is free: it never waits for a
    # write, nor fails for one it could not make. It shows the order as stored instead.
    path = str(tmp_path / "overdue.db")
    with coinorder.Service.open(path, invoice_ttl=1, busy_timeout_ms=20_000, rate_limit=0) as svc:
        key = svc.create_key(1).plain_key
        merchant = svc.authenticate(key)
        order_id = svc.create_order(merchant, currency="USD", amount=1).order.order_id
        time.sleep(1.2)
        with hold_write_lock(path):
            started = time.monotonic()
            assert svc.get_order(merchant, order_id).order.status == "NEW"
            assert [o.status for o in svc.list_orders(merchant, status="NEW").orders] == ["NEW"]
            page = svc.handle("GET", f"/pay/status?id={order_id}")
            assert (page.status, page.json()["status"]) == (200, "NEW")
            listed = svc.handle("GET", "/v1/orders", {"x-api-key": key})
            assert listed.status == 200, listed.body
            assert time.monotonic() - started < 10, "a read waited for the writer"
        # Free again: the next read moves it.
        assert svc.get_order(merchant, order_id).order.status == "EXPIRED"


def test_authentication_failed(svc: coinorder.Service) -> None:
    for missing in (None, "", "   "):
        with pytest.raises(coinorder.AuthenticationFailed) as caught:
            svc.authenticate(missing)
        check(caught.value, coinorder.AuthenticationFailed)
    created = svc.create_key(1)
    svc.deactivate_key(created.key.id)
    with pytest.raises(coinorder.AuthenticationFailed) as inactive:
        svc.authenticate(created.plain_key)
    check(inactive.value, coinorder.AuthenticationFailed)
    assert "inactive" in inactive.value.message


def test_unauthorized(svc: coinorder.Service, created_key: coinorder.CreatedKey) -> None:
    wrong = "test_" + "A" * 40
    assert wrong != created_key.plain_key
    for bad in (wrong, "garbage", "prod_" + created_key.plain_key[5:]):
        with pytest.raises(coinorder.Unauthorized) as caught:
            svc.authenticate(bad)
        check(caught.value, coinorder.Unauthorized)


def test_order_not_valid(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    with pytest.raises(coinorder.OrderNotValid) as caught:
        svc.get_order(merchant, str(uuid.uuid4()))
    check(caught.value, coinorder.OrderNotValid)


def test_order_duplicate(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    first = svc.create_order(merchant, currency="USD", amount=Decimal(5), merchant_order_id="m-1")
    replay = svc.create_order(merchant, currency="USD", amount=Decimal(5), merchant_order_id="m-1")
    assert (replay.replayed, replay.order.order_id) == (True, first.order.order_id)
    with pytest.raises(coinorder.OrderDuplicate) as caught:
        svc.create_order(merchant, currency="USD", amount=Decimal(5), merchant_order_id="m-1", title="other")
    check(caught.value, coinorder.OrderDuplicate)
    assert "m-1" in caught.value.message


def test_order_state_invalid(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
    svc.simulate(order_id, "pay")
    with pytest.raises(coinorder.OrderStateInvalid) as caught:
        svc.cancel_order(merchant, order_id)
    check(caught.value, coinorder.OrderStateInvalid)


def test_key_not_found(svc: coinorder.Service) -> None:
    with pytest.raises(coinorder.KeyNotFound) as caught:
        svc.deactivate_key("key_does_not_exist")
    check(caught.value, coinorder.KeyNotFound)


def test_payment_not_found(svc: coinorder.Service) -> None:
    with pytest.raises(coinorder.PaymentNotFound) as caught:
        svc.confirm_payment("no-such-tx")
    check(caught.value, coinorder.PaymentNotFound)


def test_not_found_simulating_on_a_live_service(db_path: str) -> None:
    with coinorder.Service.open(db_path, "live", rate_limit=0) as live:
        merchant = live.authenticate(live.create_key(1).plain_key)
        with pytest.raises(coinorder.ParametersMissing) as no_rate:
            live.create_order(merchant, currency="USD", amount=5)  # live has no built-in rates
        assert "currency" in no_rate.value.message
        live.set_rate("USDT", "USD", 1)
        order_id = live.create_order(merchant, currency="USD", amount=5).order.order_id
        with pytest.raises(coinorder.NotFound) as caught:
            live.simulate(order_id, "pay")
        check(caught.value, coinorder.NotFound)
        assert live.get_order(merchant, order_id).order.status == "NEW"


def test_internal_error_for_a_database_in_a_missing_directory(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "shop.db"
    with pytest.raises(coinorder.InternalError) as caught:
        coinorder.Service.open(str(target))
    check(caught.value, coinorder.InternalError)
    assert not target.parent.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pay_currencies": ["BTC"], "default_pay_currency": "ETH"}, "config.default_pay_currency: "),
        ({"pay_currencies": ["DOGE"]}, 'config.pay_currencies: unknown coin "DOGE"'),
        ({"payment_page_url": "not a url"}, "config.payment_page_url: must be an absolute http:// or https:// URL"),
        ({"smtp_url": "nope"}, "config.smtp_url: not a URL"),
        ({"invoice_ttl": 10**30}, "config.invoice_ttl: must be a whole number from 1 to 31536000"),
    ],
)
def test_an_option_value_the_service_cannot_use_is_the_options_fault(
    db_path: str, options: dict[str, Any], message: str
) -> None:
    # Not a 500 from the service: the caller's option, named, as any other bad value.
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, **options)
    check(caught.value, coinorder.ParametersMissing)
    assert caught.value.message.startswith(message), caught.value.message


def test_int_arguments_out_of_range_name_the_argument(svc: coinorder.Service) -> None:
    merchant = svc.authenticate(svc.create_key(user_id=1).plain_key)
    calls: list[tuple[Callable[[], object], str]] = [
        (lambda: svc.create_key(user_id=-1), "user_id: must be an integer from 0 to 9223372036854775807"),
        (lambda: svc.create_key(user_id=2**63), "user_id: must be an integer from 0 to 9223372036854775807"),
        (lambda: svc.create_key(user_id=None), "user_id: required; an integer from 0 to 9223372036854775807"),  # type: ignore[arg-type]
        (lambda: svc.deliver_due(limit=-1), "limit: must be a whole number from 0 to"),
        (lambda: svc.send_due_emails(limit=2**64), "limit: must be a whole number from 0 to"),
        (lambda: svc.list_orders(merchant, offset=2**63), "offset: "),
    ]
    for call, message in calls:
        with pytest.raises(coinorder.ParametersMissing) as caught:
            call()
        assert caught.value.message.startswith(message), caught.value.message
    # A limit past any integer is over the limit of 50, as in a query string.
    with pytest.raises(coinorder.ApiLimitExceeded) as over:
        svc.list_orders(merchant, limit=2**70)
    assert over.value.message.startswith("limit: "), over.value.message
    assert svc.list_orders(merchant, limit=50, offset=0).limit == 50
    with pytest.raises(TypeError, match="limit: must be an int"):
        svc.list_orders(merchant, limit=True)


def test_webhook_verification_error() -> None:
    headers = {"webhook-id": "msg_1", "webhook-timestamp": "1614265330", "webhook-signature": "v1,AAAA"}
    with pytest.raises(coinorder.WebhookVerificationError) as caught:
        coinorder.verify_webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers, b"{}", now=1614265330)
    check(caught.value, coinorder.WebhookVerificationError)


def test_an_authentic_body_that_is_not_a_json_object_is_refused_as_unverified() -> None:
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    key = base64.b64decode(secret.removeprefix("whsec_"))
    for body in [b"[1,2]", b"not json", b'"text"']:
        mac = hmac.new(key, b"msg_1.1614265330." + body, hashlib.sha256).digest()
        headers = {
            "webhook-id": "msg_1",
            "webhook-timestamp": "1614265330",
            "webhook-signature": "v1," + base64.b64encode(mac).decode(),
        }
        with pytest.raises(coinorder.WebhookVerificationError) as caught:
            coinorder.verify_webhook(secret, headers, body, now=1614265330)
        assert "not a JSON object" in caught.value.message, body
    with pytest.raises(coinorder.WebhookVerificationError) as missing:
        coinorder.verify_webhook(secret, None, b"{}", now=1614265330)  # type: ignore[arg-type]
    assert "missing header" in missing.value.message


def test_errors_can_be_caught_as_the_base_class(svc: coinorder.Service) -> None:
    with pytest.raises(coinorder.Error) as caught:
        svc.activate_key("key_x")
    assert isinstance(caught.value, coinorder.KeyNotFound)
    assert repr(caught.value)



def test_an_int_too_large_names_its_argument(svc: coinorder.Service) -> None:
    # pyo3's own conversion raised a bare OverflowError that named nothing.
    with pytest.raises(coinorder.ParametersMissing, match=r"^valid_until: must be a whole number"):
        svc.set_rate("BTC", "USD", Decimal("50000"), valid_until=10**30)
    for index in (-1, 2**40):
        with pytest.raises(coinorder.ParametersMissing, match=r"^index: must be a whole number from 0 to 4294967295"):
            svc.wallet_address("BTC", index)
    with pytest.raises(TypeError, match="^index: must be an int"):
        svc.wallet_address("BTC", "0")  # type: ignore[arg-type]
    with pytest.raises(coinorder.ParametersMissing, match=r"^now: must be a whole number"):
        coinorder.verify_webhook("whsec_" + base64.b64encode(b"k" * 32).decode(), {}, b"{}", now=2**70)
