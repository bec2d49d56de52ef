"""Property tests: exact money round trips and refusals, and webhook signatures against a stdlib signer."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import coinorder

MAX = Decimal(10) ** 12


def as_given(value: Decimal, as_text: bool) -> Decimal | str:
    """The amount as a Decimal or as its text: both are accepted the same way."""
    return str(value) if as_text else value


usd_valid = st.one_of(
    st.decimals(min_value=Decimal("0.01"), max_value=MAX, places=2),
    st.decimals(min_value=Decimal("0.1"), max_value=MAX, places=1),
    st.integers(min_value=1, max_value=10**12).map(Decimal),
    st.sampled_from([Decimal("0.01"), Decimal("19.99"), Decimal("19.90"), MAX, Decimal("999999999999.99")]),
)

usd_invalid = st.one_of(
    # Too many places for a cent.
    st.decimals(min_value=Decimal("0.001"), max_value=MAX, places=3).filter(lambda d: d != d.quantize(Decimal("0.01"))),
    st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(1000), places=6).filter(
        lambda d: d != d.quantize(Decimal("0.01"))
    ),
    # A valid amount with a tail far past the cent: never rounded into a valid price.
    st.builds(
        lambda amount, places: Decimal(f"{amount:f}" + "0" * (places - 3) + "1"),  # exact, not Decimal + Decimal
        st.decimals(min_value=Decimal("0.01"), max_value=MAX - 1, places=2),
        st.integers(min_value=3, max_value=30),
    ),
    # Zero or less.
    st.decimals(max_value=Decimal(0), min_value=-MAX, places=2),
    st.sampled_from([Decimal(0), Decimal("-0"), Decimal("0.00"), Decimal("-0.01")]),
    # Over 1e12.
    st.decimals(min_value=MAX + Decimal("0.01"), max_value=Decimal(10) ** 20, places=2),
    st.sampled_from([MAX + Decimal("0.01"), MAX + 1, Decimal("1E+13")]),
)


@given(amount=usd_valid, as_text=st.booleans())
def test_any_valid_usd_amount_round_trips_exactly(
    svc: coinorder.Service, merchant: coinorder.Merchant, amount: Decimal, as_text: bool
) -> None:
    created = svc.create_order(merchant, currency="USD", amount=as_given(amount, as_text))
    assert isinstance(created.order.amount, Decimal)
    assert created.order.amount == amount
    exponent = created.order.amount.as_tuple().exponent
    assert isinstance(exponent, int) and exponent >= -2
    read = svc.get_order(merchant, created.order.order_id)
    assert read.order.amount == amount
    # The invoice covers the fiat amount at the quoted rate (USDT at 1 USD: the same number).
    assert read.invoice.amount * read.invoice.rate >= amount


@given(amount=st.integers(min_value=1, max_value=10**12), kind=st.sampled_from(["int", "Decimal", "str"]))
def test_any_valid_jpy_amount_round_trips_exactly(
    svc: coinorder.Service, merchant: coinorder.Merchant, amount: int, kind: str
) -> None:
    forms: dict[str, Decimal | int | str] = {"int": amount, "Decimal": Decimal(amount), "str": str(amount)}
    given_amount = forms[kind]
    created = svc.create_order(merchant, currency="JPY", amount=given_amount)
    assert created.order.amount == amount
    assert created.order.amount == created.order.amount.to_integral_value()
    assert svc.get_order(merchant, created.order.order_id).order.amount == amount
    assert created.invoice.amount * created.invoice.rate >= amount


@given(amount=usd_invalid, as_text=st.booleans())
@example(amount=Decimal("0.01" + "0" * 27 + "1"), as_text=False)  # 31 digits: must not round to 0.01
@example(amount=Decimal("0.01" + "0" * 27 + "1"), as_text=True)
@example(amount=Decimal("-0"), as_text=False)
def test_any_invalid_usd_amount_raises_parameters_missing(
    svc: coinorder.Service, merchant: coinorder.Merchant, amount: Decimal, as_text: bool
) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.create_order(merchant, currency="USD", amount=as_given(amount, as_text))
    assert caught.value.http_status == 400
    assert caught.value.message.startswith("amount")


@given(
    amount=st.one_of(
        st.decimals(min_value=Decimal("0.1"), max_value=MAX, places=1).filter(lambda d: d != d.to_integral_value()),
        st.integers(max_value=0, min_value=-(10**12)).map(Decimal),
        st.integers(min_value=10**12 + 1, max_value=10**18).map(Decimal),
    )
)
def test_any_invalid_jpy_amount_raises_parameters_missing(
    svc: coinorder.Service, merchant: coinorder.Merchant, amount: Decimal
) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.create_order(merchant, currency="JPY", amount=amount)
    assert "amount" in caught.value.message


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """A Standard Webhooks signature made with the standard library alone."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**15), 10**15) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@given(
    key=st.binary(min_size=24, max_size=64),
    msg_id=st.from_regex(r"msg_[A-Za-z0-9]{1,30}", fullmatch=True),
    timestamp=st.integers(min_value=1_000_000_000, max_value=4_000_000_000),
    payload=st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    flip=st.integers(min_value=0),
)
def test_signatures_of_a_stdlib_signer_verify_and_any_change_breaks_them(
    key: bytes, msg_id: str, timestamp: int, payload: dict[str, object], flip: int
) -> None:
    secret = "whsec_" + base64.b64encode(key).decode()
    body = json.dumps(payload).encode()
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }
    assert coinorder.verify_webhook(secret, headers, body, now=timestamp) == payload
    changed = bytearray(body)
    changed[flip % len(changed)] ^= 0x01
    with pytest.raises(coinorder.WebhookVerificationError):
        coinorder.verify_webhook(secret, headers, bytes(changed), now=timestamp)
