"""Orders: create (replay, duplicate, validation), get, list, cancel, mark_paid; money and time types."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

import coinorder

NewOrder = Callable[..., coinorder.CreatedOrder]


def assert_utc(value: dt.datetime) -> None:
    assert isinstance(value, dt.datetime)
    assert value.tzinfo is not None
    assert value.utcoffset() == dt.timedelta(0)


def test_create_order_with_every_field(
    svc: coinorder.Service, merchant: coinorder.Merchant, created_key: coinorder.CreatedKey
) -> None:
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=5)
    created = svc.create_order(
        merchant,
        currency="USD",
        amount=Decimal("19.99"),
        merchant_order_id="cart-7",
        title="T-shirt",
        description="Blue, size M",
        pay_currency="BTC",
        callback_url="https://shop.example/back",
        webhook_url="https://shop.example/hooks",
        success_url="https://shop.example/ok",
        cancel_url="https://shop.example/cancel",
        customer_email="buyer@example.com",
    )
    assert isinstance(created, coinorder.CreatedOrder)
    assert created.replayed is False
    order = created.order
    assert isinstance(order, coinorder.Order)
    assert uuid.UUID(order.order_id)
    assert order.user_id == 1
    assert order.environment == "sandbox"
    assert order.key_id == created_key.key.id
    assert order.merchant_order_id == "cart-7"
    assert order.title == "T-shirt"
    assert order.description == "Blue, size M"
    assert order.callback_url == "https://shop.example/back"
    assert order.webhook_url == "https://shop.example/hooks"
    assert order.success_url == "https://shop.example/ok"
    assert order.cancel_url == "https://shop.example/cancel"
    assert order.customer_email == "buyer@example.com"
    assert order.amount == Decimal("19.99")
    assert isinstance(order.amount, Decimal)
    assert str(order.amount) == "19.99"
    assert order.currency == "USD"
    assert order.receive_currency == ""
    assert order.status == "NEW"
    assert isinstance(order.status, coinorder.OrderStatus)
    assert isinstance(order.status, str)
    assert order.deleted is False
    assert order.marked_paid is False
    for moment in (order.created_at, order.updated_at):
        assert_utc(moment)
        assert before <= moment <= dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)

    invoice = created.invoice
    assert isinstance(invoice, coinorder.Invoice)
    assert uuid.UUID(invoice.invoice_id)
    assert invoice.order_id == order.order_id
    assert invoice.merchant_order_id == "cart-7"
    assert invoice.currency == "BTC"
    assert invoice.rate == Decimal(10000)  # the sandbox's fake USD per BTC
    assert invoice.amount == Decimal("0.001999")  # 19.99 / 10 000, rounded up to 8 places
    assert isinstance(invoice.amount, Decimal) and isinstance(invoice.rate, Decimal)
    assert invoice.status == "NEW"
    assert invoice.receive_amount == 0
    assert isinstance(invoice.receive_amount, Decimal)
    assert invoice.receive_currency == ""
    for moment in (invoice.created_at, invoice.expired_at, invoice.updated_at):
        assert_utc(moment)
    assert dt.timedelta(minutes=29) < invoice.expired_at - invoice.created_at <= dt.timedelta(minutes=31)
    assert invoice.address
    assert invoice.payment_uri.startswith("bitcoin:")
    assert created.payment_url == f"http://127.0.0.1:8080/pay?id={order.order_id}"


def test_create_order_minimal_defaults(new_order: NewOrder) -> None:
    created = new_order()
    order = created.order
    assert order.merchant_order_id.startswith("ord_")
    for optional in (
        order.title,
        order.description,
        order.callback_url,
        order.webhook_url,
        order.success_url,
        order.cancel_url,
        order.customer_email,
    ):
        assert optional is None
    assert created.invoice.currency == "USDT"
    assert created.invoice.amount == Decimal("19.99")


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (Decimal("19.99"), Decimal("19.99")),
        (Decimal("19.90"), Decimal("19.9")),
        (Decimal("0.01"), Decimal("0.01")),
        (Decimal("1E+3"), Decimal(1000)),
        (Decimal("1000000000000"), Decimal("1000000000000")),
        (20, Decimal(20)),
        ("19.99", Decimal("19.99")),
        ("7", Decimal(7)),
    ],
)
def test_amount_round_trips_exactly(
    svc: coinorder.Service,
    merchant: coinorder.Merchant,
    new_order: NewOrder,
    amount: Decimal | int | str,
    expected: Decimal,
) -> None:
    created = new_order(amount)
    assert created.order.amount == expected
    assert isinstance(created.order.amount, Decimal)
    read = svc.get_order(merchant, created.order.order_id)
    assert read.order.amount == expected
    assert isinstance(read.order.amount, Decimal)
    assert read.invoice.amount == created.invoice.amount


def test_decimal_1999_keeps_its_digits(
    svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder
) -> None:
    order_id = new_order(Decimal("19.99")).order.order_id
    amount = svc.get_order(merchant, order_id).order.amount
    assert amount == Decimal("19.99")
    assert amount.as_tuple() == Decimal("19.99").as_tuple()


def test_float_amount_raises_type_error(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    floating: Any = 19.99  # not allowed by the signature either: this is what a careless caller does
    with pytest.raises(TypeError, match="Decimal"):
        svc.create_order(merchant, currency="USD", amount=floating)
    assert svc.list_orders(merchant).orders == []


def test_bool_amount_raises_type_error(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    with pytest.raises(TypeError):
        svc.create_order(merchant, currency="USD", amount=True)
    assert svc.list_orders(merchant).orders == []


@pytest.mark.parametrize(
    ("amount", "currency", "words"),
    [
        (0, "USD", "greater than 0"),
        (Decimal("-1"), "USD", "greater than 0"),
        (Decimal("19.999"), "USD", "decimal places"),
        (Decimal("1.5"), "JPY", "decimal places"),
        (Decimal("1000000000000.01"), "USD", "at most"),
        ("19,99", "USD", "decimal number"),
        # Text must be a plain number: a typo never becomes a price (README, "Money is exact").
        (" 5", "USD", "decimal number"),
        ("5 ", "USD", "decimal number"),
        ("+5", "USD", "decimal number"),
        ("1_000", "USD", "decimal number"),
        (".5", "USD", "decimal number"),
        ("5.", "USD", "decimal number"),
        ("", "USD", "decimal number"),
        # Digits past what a Decimal of the core holds are refused, never rounded away.
        (Decimal("19.99000000000000000000000000001"), "USD", "amount"),
        (Decimal("0.1000000000000000000000000000001"), "USD", "amount"),
    ],
)
def test_invalid_amount_raises_parameters_missing(
    svc: coinorder.Service, merchant: coinorder.Merchant, amount: Decimal | int | str, currency: str, words: str
) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.create_order(merchant, currency=currency, amount=amount)
    error = caught.value
    assert error.http_status == 400
    assert error.error_code == "PARAMETERS_MISSING"
    assert "amount" in error.message
    assert words in error.message
    assert str(error) == error.message


def test_invalid_fields_name_themselves(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"currency": "usd"}, "currency"),
        ({"currency": "XYZ"}, "currency"),
        ({"pay_currency": "DOGE"}, "pay_currency"),
        ({"callback_url": "not a url"}, "callback_url"),
        ({"webhook_url": "ftp://x.example/"}, "webhook_url"),
        ({"customer_email": "nobody"}, "customer_email"),
        ({"merchant_order_id": ""}, "merchant_order_id"),
    ]
    for fields, name in cases:
        request: dict[str, Any] = {"currency": "USD", "amount": Decimal(1)} | fields
        with pytest.raises(coinorder.ParametersMissing) as caught:
            svc.create_order(merchant, **request)
        assert name in caught.value.message, (fields, caught.value.message)


def test_title_and_description_limits(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    assert svc.create_order(merchant, currency="USD", amount=1, title="é" * 200).order.title == "é" * 200
    with pytest.raises(coinorder.ApiLimitExceeded) as caught:
        svc.create_order(merchant, currency="USD", amount=1, title="x" * 201)
    assert caught.value.http_status == 400
    assert caught.value.error_code == "API_LIMIT_EXCEEDED"
    assert "title" in caught.value.message
    with pytest.raises(coinorder.ApiLimitExceeded) as caught:
        svc.create_order(merchant, currency="USD", amount=1, description="x" * 801)
    assert "description" in caught.value.message


def test_identical_retry_replays_and_a_different_one_is_a_duplicate(
    svc: coinorder.Service, merchant: coinorder.Merchant
) -> None:
    first = svc.create_order(merchant, currency="USD", amount=Decimal("19.99"), merchant_order_id="cart-7")
    again = svc.create_order(merchant, currency="USD", amount=Decimal("19.99"), merchant_order_id="cart-7")
    assert first.replayed is False
    assert again.replayed is True
    assert again.order.order_id == first.order.order_id
    assert again.invoice.invoice_id == first.invoice.invoice_id
    assert again.payment_url == first.payment_url
    with pytest.raises(coinorder.OrderDuplicate) as caught:
        svc.create_order(merchant, currency="USD", amount=Decimal("20.00"), merchant_order_id="cart-7")
    assert caught.value.http_status == 400
    assert caught.value.error_code == "ORDER_DUPLICATE"
    assert "merchant_order_id" in caught.value.message
    assert len(svc.list_orders(merchant).orders) == 1


def test_get_order(svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder) -> None:
    created = new_order(title="Mug")
    read = svc.get_order(merchant, created.order.order_id)
    assert isinstance(read, coinorder.OrderWithInvoice)
    assert read.order == created.order or read.order.to_dict() == created.order.to_dict()
    assert read.invoice.to_dict() == created.invoice.to_dict()
    # The same UUID in upper case names the same order.
    assert svc.get_order(merchant, created.order.order_id.upper()).order.order_id == created.order.order_id


def test_unknown_order_raises_order_not_valid(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    for order_id in (str(uuid.uuid4()), "not-an-order"):
        with pytest.raises(coinorder.OrderNotValid) as caught:
            svc.get_order(merchant, order_id)
        assert caught.value.http_status == 400
        assert caught.value.error_code == "ORDER_NOT_VALID"
    with pytest.raises(coinorder.OrderNotValid):
        svc.cancel_order(merchant, str(uuid.uuid4()))


def test_other_users_orders_are_not_visible(svc: coinorder.Service, new_order: NewOrder) -> None:
    order_id = new_order().order.order_id
    other = svc.authenticate(svc.create_key(2).plain_key)
    with pytest.raises(coinorder.OrderNotValid):
        svc.get_order(other, order_id)
    assert svc.list_orders(other).orders == []


def test_list_orders_pages_and_filters(
    svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder
) -> None:
    ids = [new_order(amount=n + 1).order.order_id for n in range(5)]
    page = svc.list_orders(merchant)
    assert isinstance(page, coinorder.OrderPage)
    assert (page.limit, page.offset, page.has_more) == (10, 0, False)
    assert sorted(o.order_id for o in page.orders) == sorted(ids)
    assert all(isinstance(o, coinorder.Order) for o in page.orders)
    newest_first = [(o.created_at, o.order_id) for o in page.orders]
    assert newest_first == sorted(newest_first, reverse=True)

    first = svc.list_orders(merchant, limit=2)
    assert (len(first.orders), first.has_more) == (2, True)
    rest = svc.list_orders(merchant, limit=2, offset=4)
    assert (len(rest.orders), rest.has_more, rest.offset) == (1, False, 4)
    seen = [o.order_id for offset in (0, 2, 4) for o in svc.list_orders(merchant, limit=2, offset=offset).orders]
    assert sorted(seen) == sorted(ids)

    svc.cancel_order(merchant, ids[0])
    cancelled = svc.list_orders(merchant, status="CANCELLED")
    assert [o.order_id for o in cancelled.orders] == [ids[0]]
    assert len(svc.list_orders(merchant, status="NEW").orders) == 4
    assert page.to_dict()["limit"] == 10


def test_list_orders_limits(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    assert svc.list_orders(merchant, limit=50).limit == 50
    with pytest.raises(coinorder.ApiLimitExceeded) as caught:
        svc.list_orders(merchant, limit=51)
    assert "limit" in caught.value.message
    with pytest.raises(coinorder.ParametersMissing) as missing:
        svc.list_orders(merchant, status="SHIPPED")
    assert "status" in missing.value.message


def test_cancel_order(svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder) -> None:
    order_id = new_order().order.order_id
    cancelled = svc.cancel_order(merchant, order_id)
    assert isinstance(cancelled, coinorder.OrderWithInvoice)
    assert cancelled.order.status == "CANCELLED"
    assert cancelled.invoice.status == "CANCELLED"
    with pytest.raises(coinorder.OrderStateInvalid):
        svc.cancel_order(merchant, order_id)


def test_cancel_of_a_paid_order_raises_order_state_invalid(
    svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder
) -> None:
    order_id = new_order().order.order_id
    assert svc.simulate(order_id, "pay").order.status == "PAID"
    with pytest.raises(coinorder.OrderStateInvalid) as caught:
        svc.cancel_order(merchant, order_id)
    assert caught.value.http_status == 400
    assert caught.value.error_code == "ORDER_STATE_INVALID"
    assert "PAID" in caught.value.message
    assert svc.get_order(merchant, order_id).order.status == "PAID"


def test_mark_paid_accepts_an_expired_order(svc: coinorder.Service, new_order: NewOrder) -> None:
    order_id = new_order().order.order_id
    with pytest.raises(coinorder.OrderStateInvalid):
        svc.mark_paid(order_id)  # a NEW order is paid by payments, not by hand
    assert svc.simulate(order_id, "expire").order.status == "EXPIRED"
    paid = svc.mark_paid(order_id)
    assert isinstance(paid, coinorder.OrderWithInvoice)
    assert paid.order.status == "PAID"
    assert paid.order.marked_paid is True
    with pytest.raises(coinorder.OrderNotValid):
        svc.mark_paid(str(uuid.uuid4()))


def test_status_compares_with_strings(
    svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder
) -> None:
    order_id = new_order().order.order_id
    order = svc.get_order(merchant, order_id).order
    assert order.status == "NEW"
    assert order.status != "PAID"
    paid = svc.simulate(order_id, "pay").order
    assert paid.status == "PAID"
    assert paid.status != "NEW"
    assert paid.status in ("PAID",)


def test_order_objects_are_immutable(new_order: NewOrder) -> None:
    created = new_order()
    for obj, name, value in (
        (created, "replayed", True),
        (created, "payment_url", "https://evil.example/"),
        (created.order, "amount", Decimal(1)),
        (created.order, "status", "PAID"),
        (created.order, "order_id", "x"),
        (created.invoice, "amount", Decimal(1)),
        (created.invoice, "address", "x"),
    ):
        with pytest.raises(AttributeError):
            setattr(obj, name, value)
    assert created.order.amount == Decimal("19.99") and created.order.status == "NEW"


def test_lists_an_object_hands_out_are_copies(
    svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder
) -> None:
    order_id = new_order().order.order_id
    page = svc.list_orders(merchant)
    hash_before = hash(page)
    page.orders.clear()
    assert len(page.orders) == 1 and hash(page) == hash_before
    step = svc.simulate(order_id, "pay")
    step.payments.append(step.payments[0])
    step.events.clear()
    assert len(step.payments) == 1 and [e.type for e in step.events] == ["order.paid"]


def test_to_dict_keeps_python_types(new_order: NewOrder) -> None:
    created = new_order(title="Mug")
    order = created.order.to_dict()
    assert isinstance(order, dict)
    assert order["order_id"] == created.order.order_id
    assert order["amount"] == Decimal("19.99") and isinstance(order["amount"], Decimal)
    assert isinstance(order["created_at"], dt.datetime)
    assert order["created_at"].tzinfo is not None
    assert order["status"] == "NEW"
    assert order["title"] == "Mug"
    assert order["description"] is None
    invoice = created.invoice.to_dict()
    assert invoice["invoice_id"] == created.invoice.invoice_id
    assert isinstance(invoice["rate"], Decimal)
    assert isinstance(invoice["expired_at"], dt.datetime)
    whole = created.to_dict()
    assert isinstance(whole, dict)
    assert whole["replayed"] is False
    assert whole["payment_url"] == created.payment_url


def test_repr_is_readable(new_order: NewOrder) -> None:
    created = new_order()
    assert "Order" in repr(created.order)
    assert created.order.order_id in repr(created.order)
    assert "Invoice" in repr(created.invoice)


def test_objects_compare_and_hash_by_value(svc: coinorder.Service, merchant: coinorder.Merchant, new_order: NewOrder) -> None:
    created = new_order(title="Mug")
    again = svc.get_order(merchant, created.order.order_id)
    assert again.order is not created.order
    assert again.order == created.order and not (again.order != created.order)
    assert hash(again.order) == hash(created.order)
    assert again.invoice == created.invoice
    assert again == svc.get_order(merchant, created.order.order_id), "objects holding objects too"
    assert len({created.order, again.order}) == 1
    other = new_order(title="Mug")
    assert other.order != created.order
    # Another type is never equal, not even the object's own dict.
    as_dict: object = created.order.to_dict()
    an_invoice: object = created.invoice
    assert created.order != as_dict
    assert created.order != an_invoice
    # A change shows: the same order once paid is another value.
    svc.simulate(created.order.order_id, "pay")
    paid = svc.get_order(merchant, created.order.order_id)
    assert paid.order != created.order and paid.order.order_id == created.order.order_id
    page = svc.list_orders(merchant, limit=50)
    assert paid.order in page.orders
