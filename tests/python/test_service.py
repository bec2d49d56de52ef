"""Service.open and its options, close and the context manager, the module's metadata."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import time
from decimal import Decimal
from pathlib import Path

import pytest

import coinorder


def test_version_is_a_semver_string() -> None:
    assert isinstance(coinorder.__version__, str)
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", coinorder.__version__)


def test_open_defaults_to_the_sandbox(db_path: str) -> None:
    with coinorder.Service.open(db_path) as svc:
        assert svc.environment == "sandbox"
    assert db_path.startswith("postgres://") or Path(db_path).exists()


def test_open_takes_a_pathlib_path(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    with coinorder.Service.open(path) as svc:
        key = svc.create_key(user_id=7)
    assert path.exists()
    with coinorder.Service.open(path) as svc:
        assert svc.authenticate(key.plain_key).user_id == 7
    with pytest.raises(TypeError):
        coinorder.Service.open(42)  # type: ignore[arg-type]


@pytest.mark.skipif(not os.environ.get("COINORDER_TEST_POSTGRES"), reason="needs the PostgreSQL pass")
def test_postgres_needs_the_shared_key_file(db_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COINORDER_SECRET_KEY_FILE")
    with pytest.raises(coinorder.ParametersMissing, match="^secret_key_file: .*secret key file every host shares"):
        coinorder.Service.open(db_path)
    missing = tmp_path / "no-such.key"
    with pytest.raises(coinorder.ParametersMissing, match="^secret_key_file: .*does not exist"):
        coinorder.Service.open(db_path, secret_key_file=str(missing))
    assert not missing.exists()
    key_file = tmp_path / "shared.key"
    key_file.write_text("Y29pbm9yZGVyLXRlc3Qta2V5LTMyLWJ5dGVzLWxvbmc=\n")
    with coinorder.Service.open(db_path, secret_key_file=str(key_file)) as svc:
        created = svc.create_key(1)
        assert svc.authenticate(created.plain_key).user_id == 1


def test_open_live(db_path: str) -> None:
    with coinorder.Service.open(db_path, "live") as svc:
        assert svc.environment == "live"


def test_open_with_every_option(tmp_path: Path) -> None:
    with coinorder.Service.open(
        str(tmp_path / "all.db"),
        "sandbox",
        payment_page_url="https://pay.shop.example/checkout",
        invoice_ttl=60,
        rate_limit=0,
        rate_burst=5,
        synchronous="normal",
        background_checkpoints=True,
        busy_timeout_ms=5000,
        secret_key_file=str(tmp_path / "secret.key"),
        webhook_timeout_secs=2,
        delivery_concurrency=2,
        allow_private_webhooks=True,
        pay_currencies=["BTC", "USDT"],
        default_pay_currency="BTC",
        smtp_url="smtp://127.0.0.1:2525",
        smtp_from="shop <shop@example.com>",
    ) as svc:
        key = svc.create_key(1)
        merchant = svc.authenticate(key.plain_key)
        created = svc.create_order(merchant, currency="USD", amount=Decimal("100"))
        assert created.payment_url.startswith("https://pay.shop.example/checkout?id=")
        assert created.invoice.currency == "BTC"  # default_pay_currency
        assert created.invoice.amount == Decimal("0.01")  # 100 USD at the sandbox's 10 000 USD/BTC
        ttl = created.invoice.expired_at - created.invoice.created_at
        assert 59 <= ttl.total_seconds() <= 61
    assert (tmp_path / "secret.key").exists()
    assert not (tmp_path / "all.db.key").exists()


def _orders_in_the_file_itself(db: Path, tmp_path: Path) -> int:
    """Orders in a copy of the database file without its log: what checkpoints copied."""
    copy = tmp_path / "file-only.db"
    shutil.copyfile(db, copy)
    conn = sqlite3.connect(copy)
    try:
        if conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'orders'").fetchone()[0] == 0:
            return 0
        count: int = conn.execute("SELECT count(*) FROM orders").fetchone()[0]
        return count
    finally:
        conn.close()


@pytest.mark.parametrize("background", [True, False])
def test_the_service_copies_its_log_into_the_database_file_by_itself(tmp_path: Path, background: bool) -> None:
    db = tmp_path / "log.db"
    with coinorder.Service.open(str(db), rate_limit=0, background_checkpoints=background) as svc:
        merchant = svc.authenticate(svc.create_key(1).plain_key)
        for _ in range(20):  # about 250 pages of log: no commit checkpoints by itself
            svc.create_order(merchant, currency="USD", amount=Decimal("19.99"))
        if background:
            deadline = time.monotonic() + 10
            while _orders_in_the_file_itself(db, tmp_path) < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _orders_in_the_file_itself(db, tmp_path) == 20
        else:
            time.sleep(1.2)
            assert _orders_in_the_file_itself(db, tmp_path) == 0


def test_background_checkpoints_must_be_a_bool(db_path: str) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, background_checkpoints="no")
    assert caught.value.message == "config.background_checkpoints: must be true or false"


def test_unknown_option_names_it(db_path: str) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, invoice_tll=60)
    assert "config.invoice_tll" in caught.value.message
    assert caught.value.http_status == 400


def test_bad_option_value_names_it(db_path: str) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, invoice_ttl=0)
    assert "config.invoice_ttl" in caught.value.message


@pytest.mark.parametrize("target", ["", ":memory:"])
def test_a_target_that_is_not_a_file_is_refused_and_nothing_is_written(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite would give each connection an empty database of its own: every later call
    # would fail. Refused at open, naming the argument, before any key file is made.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(target)
    assert caught.value.message.startswith("target: must be a SQLite file path"), caught.value.message
    assert list(tmp_path.iterdir()) == []


def test_unknown_environment_is_refused(db_path: str) -> None:
    with pytest.raises(coinorder.ParametersMissing) as caught:
        coinorder.Service.open(db_path, "prod")
    assert "environment" in caught.value.message


def test_close_is_idempotent_and_later_calls_raise_value_error(db_path: str) -> None:
    svc = coinorder.Service.open(db_path)
    svc.close()
    svc.close()
    with pytest.raises(ValueError, match="service is closed"):
        svc.create_key(1)
    with pytest.raises(ValueError, match="service is closed"):
        svc.list_keys()
    with pytest.raises(ValueError, match="service is closed"):
        svc.handle("GET", "/v1/orders")


def test_a_closed_service_refuses_to_enter_a_with_block(db_path: str) -> None:
    svc = coinorder.Service.open(db_path)
    svc.close()
    with pytest.raises(ValueError, match="service is closed"):
        with svc:
            pass


def test_context_manager_closes_on_exit(db_path: str) -> None:
    with coinorder.Service.open(db_path) as svc:
        key = svc.create_key(1)
    with pytest.raises(ValueError):
        svc.authenticate(key.plain_key)


def test_context_manager_closes_on_error_and_lets_it_propagate(db_path: str) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with coinorder.Service.open(db_path) as svc:
            raise RuntimeError("boom")
    with pytest.raises(ValueError):
        svc.list_keys()


def test_data_persists_across_opens(db_path: str) -> None:
    with coinorder.Service.open(db_path) as svc:
        key = svc.create_key(7)
        merchant = svc.authenticate(key.plain_key)
        order_id = svc.create_order(merchant, currency="EUR", amount="5").order.order_id
    with coinorder.Service.open(db_path) as svc:
        merchant = svc.authenticate(key.plain_key)
        assert svc.get_order(merchant, order_id).order.amount == Decimal("5")
        assert [k.id for k in svc.list_keys()] == [key.key.id]


def test_live_and_sandbox_do_not_see_each_other(db_path: str) -> None:
    with coinorder.Service.open(db_path, "sandbox") as sandbox:
        test_key = sandbox.create_key(1)
    with coinorder.Service.open(db_path, "live") as live:
        with pytest.raises(coinorder.Unauthorized):
            live.authenticate(test_key.plain_key)
        prod_key = live.create_key(1)
        assert prod_key.plain_key.startswith("prod_")
        assert prod_key.key.environment == "live"
        assert live.authenticate(prod_key.plain_key).environment == "live"
