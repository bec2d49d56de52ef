"""Payments from a chain watcher, sandbox simulation, expiry, rates and delivery reports."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import coinorder

NewOrder = Callable[..., coinorder.CreatedOrder]


def assert_utc(value: dt.datetime) -> None:
    assert isinstance(value, dt.datetime)
    assert value.tzinfo is not None
    assert value.utcoffset() == dt.timedelta(0)


def test_record_then_confirm_a_payment(svc: coinorder.Service, new_order: NewOrder) -> None:
    created = new_order(Decimal("19.99"))
    order_id = created.order.order_id
    seen = svc.record_payment(order_id, "tx-1", created.invoice.amount, confirmed=False)
    assert isinstance(seen, coinorder.PaymentOutcome)
    assert seen.duplicate is False
    payment = seen.payment
    assert isinstance(payment, coinorder.Payment)
    assert (payment.txid, payment.order_id, payment.currency) == ("tx-1", order_id, "USDT")
    assert payment.amount == Decimal("19.99") and isinstance(payment.amount, Decimal)
    assert payment.state == "unconfirmed"
    assert payment.counts is True
    assert_utc(payment.seen_at)
    assert payment.settled_at is None
    assert seen.order.status == "PENDING"
    assert seen.invoice.status == "PENDING"
    assert seen.invoice.receive_amount == Decimal("19.99")
    assert seen.invoice.receive_currency == "USD"
    (pending,) = seen.events
    assert isinstance(pending, coinorder.Event)
    assert pending.type == "order.pending"
    assert pending.order_id == order_id
    assert pending.sequence == 1
    assert (pending.previous_status, pending.status) == ("NEW", "PENDING")
    assert pending.event_id
    assert_utc(pending.created_at)

    again = svc.record_payment(order_id, "tx-1", "19.99", confirmed=False)
    assert again.duplicate is True
    assert again.events == []
    assert again.order.status == "PENDING"

    done = svc.confirm_payment("tx-1")
    assert done.payment.state == "confirmed"
    assert done.payment.settled_at is not None
    assert_utc(done.payment.settled_at)
    assert done.order.status == "PAID"
    (paid,) = done.events
    assert (paid.type, paid.sequence, paid.previous_status, paid.status) == ("order.paid", 2, "PENDING", "PAID")
    assert paid.event_id != pending.event_id

    (listed,) = svc.order_payments(order_id)
    assert isinstance(listed, coinorder.Payment)
    assert (listed.txid, listed.state, listed.amount) == ("tx-1", "confirmed", Decimal("19.99"))
    assert done.to_dict()["duplicate"] is False
    assert listed.to_dict()["amount"] == Decimal("19.99")
    assert paid.to_dict()["type"] == "order.paid"


def test_a_confirmed_payment_pays_at_once(svc: coinorder.Service, new_order: NewOrder) -> None:
    created = new_order(Decimal("10"))
    outcome = svc.record_payment(created.order.order_id, "tx-now", 10)
    assert outcome.payment.state == "confirmed"
    assert outcome.order.status == "PAID"
    assert [e.type for e in outcome.events] == ["order.paid"]


def test_reject_a_payment_fails_the_order(svc: coinorder.Service, new_order: NewOrder) -> None:
    order_id = new_order().order.order_id
    svc.record_payment(order_id, "tx-bad", Decimal("19.99"), confirmed=False)
    rejected = svc.reject_payment("tx-bad")
    assert rejected.payment.state == "rejected"
    assert rejected.order.status == "FAILED"
    assert [e.type for e in rejected.events] == ["order.failed"]
    assert rejected.invoice.receive_amount == 0
    # The payment was seen: the currency stays, only its amount dropped out.
    assert rejected.invoice.receive_currency == "USD"
    assert rejected.order.receive_currency == "USD"


def test_unknown_txid_raises_payment_not_found(svc: coinorder.Service) -> None:
    for call in (svc.confirm_payment, svc.reject_payment):
        with pytest.raises(coinorder.PaymentNotFound) as caught:
            call("tx-nobody-sent")
        assert caught.value.error_code == "PAYMENT_NOT_FOUND"
        assert caught.value.http_status == 400
        assert "tx-nobody-sent" in caught.value.message


def test_payment_for_an_unknown_order_and_bad_amounts(svc: coinorder.Service, new_order: NewOrder) -> None:
    with pytest.raises(coinorder.OrderNotValid):
        svc.record_payment(str(uuid.uuid4()), "tx-2", Decimal(1))
    order_id = new_order().order.order_id
    for amount in (Decimal(0), Decimal("-1"), Decimal("0.0000001")):  # USDT has 6 decimals
        with pytest.raises(coinorder.ParametersMissing) as caught:
            svc.record_payment(order_id, "tx-3", amount)
        assert "amount" in caught.value.message
    with pytest.raises(coinorder.ParametersMissing) as missing:
        svc.record_payment(order_id, "", Decimal(1))
    assert "txid" in missing.value.message
    assert svc.order_payments(order_id) == []


def test_simulate_partial_then_pay(svc: coinorder.Service, new_order: NewOrder) -> None:
    created = new_order(Decimal("20"))
    order_id = created.order.order_id
    half = svc.simulate(order_id, "partial")
    assert isinstance(half, coinorder.Simulation)
    assert half.order.status == "PENDING" and half.invoice.status == "PENDING"
    (payment,) = half.payments
    assert isinstance(payment, coinorder.Payment)
    assert payment.amount == Decimal(10) and payment.state == "confirmed"
    assert [e.type for e in half.events] == ["order.pending"]
    rest = svc.simulate(order_id, "pay")
    assert rest.order.status == "PAID"
    assert rest.payments[0].amount == Decimal(10)
    assert [(e.type, e.sequence) for e in rest.events] == [("order.paid", 2)]
    assert len(svc.order_payments(order_id)) == 2
    with pytest.raises(coinorder.ParametersMissing, match="nothing is due"):
        svc.simulate(order_id, "pay")


def test_simulate_with_an_amount_and_unconfirmed(svc: coinorder.Service, new_order: NewOrder) -> None:
    order_id = new_order(Decimal("20")).order.order_id
    some = svc.simulate(order_id, "pay", amount=Decimal("5"))
    assert some.order.status == "PENDING"
    assert some.payments[0].amount == Decimal(5)
    waiting = svc.simulate(order_id, "pay", confirmed=False)
    assert waiting.order.status == "PENDING"
    assert waiting.payments[0].state == "unconfirmed"
    assert waiting.payments[0].amount == Decimal(15)
    confirmed = svc.simulate(order_id, "confirm")
    assert confirmed.order.status == "PAID"
    assert [p.state for p in confirmed.payments] == ["confirmed"]


def test_simulate_reject_cancel_expire(svc: coinorder.Service, new_order: NewOrder) -> None:
    rejected_id = new_order().order.order_id
    svc.simulate(rejected_id, "pay", confirmed=False)
    rejected = svc.simulate(rejected_id, "reject")
    assert rejected.order.status == "FAILED"
    assert [p.state for p in rejected.payments] == ["rejected"]

    cancelled = svc.simulate(new_order().order.order_id, "cancel")
    assert cancelled.order.status == "CANCELLED"
    assert cancelled.payments == []
    assert [e.type for e in cancelled.events] == ["order.cancelled"]

    expired = svc.simulate(new_order().order.order_id, "expire")
    assert expired.order.status == "EXPIRED"
    assert [e.type for e in expired.events] == ["order.expired"]
    assert expired.to_dict()["payments"] == []


def test_simulate_refuses_an_unknown_action_and_order(svc: coinorder.Service, new_order: NewOrder) -> None:
    order_id = new_order().order.order_id
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.simulate(order_id, "refund")
    assert "action" in caught.value.message
    with pytest.raises(coinorder.OrderNotValid):
        svc.simulate(str(uuid.uuid4()), "pay")


def test_expire_due(tmp_path: Path) -> None:
    with coinorder.Service.open(str(tmp_path / "ttl.db"), invoice_ttl=1, rate_limit=0) as svc:
        merchant = svc.authenticate(svc.create_key(1).plain_key)
        unpaid = svc.create_order(merchant, currency="USD", amount=10).order.order_id
        short = svc.create_order(merchant, currency="USD", amount=10).order.order_id
        open_one = svc.expire_due()
        assert isinstance(open_one, coinorder.ExpiryReport)
        assert (open_one.expired, open_one.failed) == (0, 0)
        svc.simulate(short, "partial")
        time.sleep(1.2)
        report = svc.expire_due()
        assert (report.expired, report.failed) == (1, 1)
        assert svc.get_order(merchant, unpaid).order.status == "EXPIRED"
        assert svc.get_order(merchant, short).order.status == "FAILED"
        assert svc.expire_due().to_dict() == {"expired": 0, "failed": 0}


def test_set_and_list_rates(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    assert svc.list_rates() == []
    until = dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc)
    rate = svc.set_rate("BTC", "USD", Decimal("50000.5"), valid_until=until)
    assert isinstance(rate, coinorder.Rate)
    assert (rate.crypto, rate.fiat, rate.rate) == ("BTC", "USD", Decimal("50000.5"))
    assert isinstance(rate.rate, Decimal)
    assert rate.valid_until == until
    assert rate.valid_until is not None
    assert_utc(rate.valid_until)
    assert_utc(rate.updated_at)
    forever = svc.set_rate("ETH", "EUR", 2000)
    assert forever.valid_until is None
    listed = {(r.crypto, r.fiat): r.rate for r in svc.list_rates()}
    assert listed == {("BTC", "USD"): Decimal("50000.5"), ("ETH", "EUR"): Decimal(2000)}
    created = svc.create_order(merchant, currency="USD", amount=Decimal("100.01"), pay_currency="BTC")
    assert created.invoice.rate == Decimal("50000.5")
    assert created.invoice.amount == Decimal("0.00200018")  # 100.01 / 50000.5 rounded up to 8 places
    assert rate.to_dict()["rate"] == Decimal("50000.5")


def test_set_rate_refuses_bad_input(svc: coinorder.Service) -> None:
    for crypto, fiat, value, field in (
        ("DOGE", "USD", Decimal(1), "crypto"),
        ("BTC", "usd", Decimal(1), "fiat"),
        ("BTC", "USD", Decimal(0), "rate"),
    ):
        with pytest.raises(coinorder.ParametersMissing) as caught:
            svc.set_rate(crypto, fiat, value)
        assert field in caught.value.message


def test_deliver_due_without_a_target(svc: coinorder.Service, new_order: NewOrder) -> None:
    empty = svc.deliver_due()
    assert isinstance(empty, coinorder.DeliveryReport)
    assert (empty.attempted, empty.delivered, empty.retrying, empty.failed, empty.no_target) == (0, 0, 0, 0, 0)
    svc.simulate(new_order().order.order_id, "pay")
    report = svc.deliver_due(limit=10)
    assert report.no_target == 1
    assert report.delivered == 0
    assert set(report.to_dict()) == {"attempted", "delivered", "retrying", "failed", "no_target"}


def test_floats_are_refused_wherever_money_goes_in(svc: coinorder.Service, new_order: NewOrder) -> None:
    order_id = new_order().order.order_id
    floating: Any = 19.99  # what a careless caller passes; the signatures do not allow it
    with pytest.raises(TypeError, match="Decimal"):
        svc.record_payment(order_id, "tx-float", floating)
    with pytest.raises(TypeError, match="Decimal"):
        svc.simulate(order_id, "pay", amount=floating)
    with pytest.raises(TypeError, match="Decimal"):
        svc.set_rate("BTC", "USD", floating)
    assert svc.order_payments(order_id) == []
    assert svc.list_rates() == []


SMTP_SINK = Path(__file__).resolve().parent.parent / "smtp_support" / "smtp_sink.py"


def test_send_due_emails_sends_the_payment_link_over_smtp(db_path: str) -> None:
    """An order with a customer_email is mailed by send_due_emails to a real SMTP server
    (aiosmtpd on 127.0.0.1), and only once; deliver_due leaves e-mails alone."""
    sink = subprocess.Popen(
        [sys.executable, str(SMTP_SINK), "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sink.stdout is not None
        ready = json.loads(sink.stdout.readline())
        url = f"smtp://127.0.0.1:{ready['port']}"
        options: dict[str, Any] = {"rate_limit": 0, "smtp_url": url, "smtp_from": "Shop <pay@shop.example>"}
        with coinorder.Service.open(db_path, "sandbox", **options) as svc:
            merchant = svc.authenticate(svc.create_key(user_id=1).plain_key)
            created = svc.create_order(merchant, currency="USD", amount=Decimal("5"), customer_email="buyer@example.com")
            assert svc.deliver_due().attempted == 0
            report = svc.send_due_emails(limit=10)
            assert isinstance(report, coinorder.EmailReport)
            assert (report.attempted, report.sent, report.retrying, report.failed) == (1, 1, 0, 0)
            assert report.to_dict() == {"attempted": 1, "sent": 1, "retrying": 0, "failed": 0}
            assert svc.send_due_emails().attempted == 0
        message = json.loads(sink.stdout.readline())
        assert message["rcpt_tos"] == ["buyer@example.com"]
        assert created.order.order_id in (message["text"] or "")
    finally:
        if sink.stdin is not None:
            sink.stdin.close()
        try:
            sink.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sink.kill()
            sink.wait()


def test_send_due_emails_without_smtp_leaves_them_pending(svc: coinorder.Service, new_order: NewOrder) -> None:
    new_order(customer_email="buyer@example.com")
    report = svc.send_due_emails()
    assert (report.attempted, report.sent, report.retrying, report.failed) == (0, 0, 0, 0)
