"""API keys: create, list, activate/deactivate, webhook URL, secret rotation, delete, authenticate."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import ContextManager

import pytest

import coinorder


def assert_utc(value: dt.datetime) -> None:
    assert isinstance(value, dt.datetime)
    assert value.tzinfo is not None
    assert value.utcoffset() == dt.timedelta(0)


def test_create_key_returns_the_key_and_secret_once(svc: coinorder.Service) -> None:
    created = svc.create_key(42, webhook_url="https://shop.example/hooks")
    assert isinstance(created, coinorder.CreatedKey)
    assert created.plain_key.startswith("test_")
    assert created.webhook_secret.startswith("whsec_")
    key = created.key
    assert isinstance(key, coinorder.ApiKey)
    assert key.id.startswith("key_")
    assert key.user_id == 42
    assert key.environment == "sandbox"
    assert key.status == "active"
    assert key.webhook_url == "https://shop.example/hooks"
    assert key.key_hint.startswith("test_")
    assert created.plain_key.endswith(key.key_hint[-4:])
    assert key.key_hint != created.plain_key
    assert_utc(key.created_at)
    assert key.last_used_at is None


def test_list_keys_never_shows_plain_keys(svc: coinorder.Service) -> None:
    first = svc.create_key(1)
    second = svc.create_key(2)
    keys = svc.list_keys()
    assert {k.id for k in keys} == {first.key.id, second.key.id}
    assert all(isinstance(k, coinorder.ApiKey) for k in keys)
    for key in keys:
        text = repr(key) + repr(key.to_dict())
        assert first.plain_key not in text and second.plain_key not in text
        assert "whsec_" not in text


def test_authenticate_returns_the_merchant_and_marks_the_key_used(svc: coinorder.Service) -> None:
    created = svc.create_key(9)
    merchant = svc.authenticate(created.plain_key)
    assert isinstance(merchant, coinorder.Merchant)
    assert merchant.key_id == created.key.id
    assert merchant.user_id == 9
    assert merchant.environment == "sandbox"
    (listed,) = svc.list_keys()
    assert listed.last_used_at is not None
    assert_utc(listed.last_used_at)


def test_deactivate_and_activate(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    inactive = svc.deactivate_key(created.key.id)
    assert inactive.status == "inactive"
    with pytest.raises(coinorder.AuthenticationFailed) as caught:
        svc.authenticate(created.plain_key)
    assert caught.value.http_status == 400
    assert caught.value.error_code == "AUTHENTICATION_FAILED"
    active = svc.activate_key(created.key.id)
    assert active.status == "active"
    assert svc.authenticate(created.plain_key).key_id == created.key.id


def test_set_and_clear_the_webhook_url(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    assert svc.set_key_webhook_url(created.key.id, "https://shop.example/w").webhook_url == "https://shop.example/w"
    assert svc.list_keys()[0].webhook_url == "https://shop.example/w"
    assert svc.set_key_webhook_url(created.key.id, None).webhook_url is None


def test_bad_webhook_url_names_the_field(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.set_key_webhook_url(created.key.id, "not a url")
    assert "webhook_url" in caught.value.message
    with pytest.raises(coinorder.ParametersMissing):
        svc.create_key(1, webhook_url="ftp://shop.example/")


def test_negative_user_id_is_refused(svc: coinorder.Service) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.create_key(-1)
    assert "user_id" in caught.value.message


def test_no_user_id_is_refused_and_never_taken_for_account_0(svc: coinorder.Service) -> None:
    # A host whose account lookup came back empty must not get a key that shares
    # account 0's orders.
    with pytest.raises(coinorder.ParametersMissing) as caught:
        svc.create_key(user_id=None)  # type: ignore[arg-type]
    assert caught.value.message == "user_id: required; an integer from 0 to 9223372036854775807"
    assert svc.list_keys() == []
    with pytest.raises(TypeError, match="user_id: must be an int"):
        svc.create_key(user_id=1.0)  # type: ignore[arg-type]


def test_rotate_the_webhook_secret(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    new_secret = svc.rotate_key_webhook_secret(created.key.id)
    assert new_secret.startswith("whsec_")
    assert new_secret != created.webhook_secret


def test_delete_key(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    svc.delete_key(created.key.id)
    assert svc.list_keys() == []
    with pytest.raises(coinorder.Unauthorized):
        svc.authenticate(created.plain_key)
    with pytest.raises(coinorder.KeyNotFound):
        svc.delete_key(created.key.id)


def test_unknown_key_id_raises_key_not_found(svc: coinorder.Service) -> None:
    for call in (
        lambda: svc.activate_key("key_nope"),
        lambda: svc.deactivate_key("key_nope"),
        lambda: svc.set_key_webhook_url("key_nope", None),
        lambda: svc.rotate_key_webhook_secret("key_nope"),
        lambda: svc.delete_key("key_nope"),
    ):
        with pytest.raises(coinorder.KeyNotFound) as caught:
            call()
        assert caught.value.error_code == "KEY_NOT_FOUND"
        assert caught.value.http_status == 400
        assert "key_nope" in caught.value.message


def test_created_key_repr_hides_the_key_and_secret(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    for text in (repr(created), str(created), repr(created.key)):
        assert created.plain_key not in text
        assert created.webhook_secret not in text
        assert "whsec_" not in text
    assert created.key.id in repr(created.key)


def test_created_key_to_dict(svc: coinorder.Service) -> None:
    created = svc.create_key(3, webhook_url="https://shop.example/w")
    data = created.key.to_dict()
    assert data["id"] == created.key.id
    assert data["user_id"] == 3
    assert data["status"] == "active"
    assert data["webhook_url"] == "https://shop.example/w"
    assert isinstance(data["created_at"], dt.datetime)
    assert "whsec_" not in repr(data)


def test_keys_and_merchants_are_immutable(svc: coinorder.Service) -> None:
    created = svc.create_key(1)
    merchant = svc.authenticate(created.plain_key)
    for obj, name, value in (
        (created, "plain_key", "x"),
        (created, "webhook_secret", "x"),
        (created.key, "status", "inactive"),
        (created.key, "user_id", 2),
        (merchant, "user_id", 2),
        (merchant, "key_id", "key_x"),
    ):
        with pytest.raises(AttributeError):
            setattr(obj, name, value)
    assert created.key.status == "active" and merchant.user_id == 1
    assert merchant.to_dict()["key_id"] == created.key.id


def test_a_key_use_kept_while_the_writer_was_busy_is_written_by_close(
    tmp_path: Path, hold_write_lock: Callable[[str], ContextManager[None]]
) -> None:
    path = str(tmp_path / "busy.db")
    svc = coinorder.Service.open(path, busy_timeout_ms=200)
    created = svc.create_key(1)
    with hold_write_lock(path):
        svc.authenticate(created.plain_key)  # the use cannot be written now: it is kept
        (kept,) = svc.list_keys()
        assert kept.last_used_at is None
    svc.close()
    with coinorder.Service.open(path) as reopened:
        (written,) = reopened.list_keys()
        assert written.last_used_at is not None
        assert_utc(written.last_used_at)


def test_get_key_and_the_display_name_the_payment_page_shows(svc: coinorder.Service) -> None:
    created = svc.create_key(3)
    key = svc.get_key(created.key.id)
    assert key.id == created.key.id and key.user_id == 3
    assert key.display_name is None
    assert key.to_dict()["display_name"] is None

    named = svc.set_key_display_name(created.key.id, "Ada Mugs Ltd")
    assert named.display_name == "Ada Mugs Ltd"
    assert svc.get_key(created.key.id).display_name == "Ada Mugs Ltd"
    merchant = svc.authenticate(created.plain_key)
    order_id = svc.create_order(merchant, currency="USD", amount=4, title="Mug").order.order_id
    page = svc.handle("GET", f"/pay?id={order_id}")
    assert page.status == 200
    assert b"Ada Mugs Ltd" in page.body

    for bad, message in (("  ", "display_name: must not be empty"), ("n" * 81, "display_name: at most 80 characters")):
        with pytest.raises(coinorder.ParametersMissing) as caught:
            svc.set_key_display_name(created.key.id, bad)
        assert caught.value.message.startswith(message)
    assert svc.set_key_display_name(created.key.id, None).display_name is None
    with pytest.raises(coinorder.KeyNotFound):
        svc.get_key("key_doesnotexist0000")
    with pytest.raises(coinorder.KeyNotFound):
        svc.set_key_display_name("key_doesnotexist0000", "x")
