"""Every exception class, each raised by a real failure, with its code, status and message."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import ContextManager

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
            # Reads go on while the lock is held.
            assert svc.list_orders(merchant).orders == []
        svc.create_order(merchant, currency="USD", amount=1)


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


def test_internal_error_for_an_unusable_configuration(db_path: str) -> None:
    with pytest.raises(coinorder.InternalError) as caught:
        coinorder.Service.open(db_path, pay_currencies=["BTC"], default_pay_currency="ETH")
    check(caught.value, coinorder.InternalError)


def test_webhook_verification_error() -> None:
    headers = {"webhook-id": "msg_1", "webhook-timestamp": "1614265330", "webhook-signature": "v1,AAAA"}
    with pytest.raises(coinorder.WebhookVerificationError) as caught:
        coinorder.verify_webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", headers, b"{}", now=1614265330)
    check(caught.value, coinorder.WebhookVerificationError)


def test_errors_can_be_caught_as_the_base_class(svc: coinorder.Service) -> None:
    with pytest.raises(coinorder.Error) as caught:
        svc.activate_key("key_x")
    assert isinstance(caught.value, coinorder.KeyNotFound)
    assert repr(caught.value)

