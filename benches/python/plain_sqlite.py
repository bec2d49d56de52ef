"""The baseline for benches/python/bench.py: the same three order operations written the
plain way, in Python with the standard library's ``sqlite3`` and nothing else.

It is what a Python developer would write by hand instead of using coinorder, kept
honest so the comparison means something:

* the same durability: WAL, ``synchronous=FULL``, one transaction per create that writes
  the order row and its invoice row together;
* tables of a similar shape (an ``orders`` row and an ``invoices`` row per order), a
  unique ``(user_id, merchant_order_id)`` index that refuses duplicates, and an index
  that serves the newest-first listing;
* the same kind of work per call: uuid4 ids, ISO 8601 UTC timestamps (millisecond
  precision, stored as TEXT so they sort), amounts stored as decimal TEXT and returned as
  ``decimal.Decimal``, timestamps returned as aware ``datetime``s, and a fiat price quoted
  into a crypto amount with ``Decimal`` arithmetic;
* one connection, the standard module's default statement cache, no result caching.

It does less than coinorder (no API keys, no request fingerprint for idempotent replays,
no rate lookup, no deposit address, no events, only minimal validation, statuses as plain
``str``), so it is the floor a hand-written version starts from, not an equivalent.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
import uuid
from decimal import Decimal
from typing import Any

__all__ = ["PlainOrders", "DuplicateOrder"]

_UTC = _dt.timezone.utc
_INVOICE_TTL = _dt.timedelta(minutes=30)
_PAY_CURRENCY = "USDT"
_RATE = Decimal("1")  # fiat per coin, as coinorder's sandbox quotes USD in USDT
_COIN_STEP = Decimal("0.000001")  # USDT has 6 decimals

_SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id          TEXT PRIMARY KEY,
    user_id           INTEGER NOT NULL,
    merchant_order_id TEXT NOT NULL,
    title             TEXT,
    amount            TEXT NOT NULL,
    currency          TEXT NOT NULL,
    status            TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS orders_by_merchant_order_id ON orders (user_id, merchant_order_id);
CREATE INDEX IF NOT EXISTS orders_by_user ON orders (user_id, created_at DESC, order_id DESC);
CREATE TABLE IF NOT EXISTS invoices (
    invoice_id TEXT PRIMARY KEY,
    order_id   TEXT NOT NULL UNIQUE REFERENCES orders (order_id),
    amount     TEXT NOT NULL,
    currency   TEXT NOT NULL,
    rate       TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expired_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
) STRICT;
"""

_ORDER_COLUMNS = (
    "o.order_id, o.user_id, o.merchant_order_id, o.title, o.amount, o.currency, o.status, o.created_at, o.updated_at"
)
_INVOICE_COLUMNS = "i.invoice_id, i.amount, i.currency, i.rate, i.status, i.created_at, i.expired_at, i.updated_at"

_INSERT_ORDER = (
    "INSERT INTO orders (order_id, user_id, merchant_order_id, title, amount, currency, status, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, 'NEW', ?, ?)"
)
_INSERT_INVOICE = (
    "INSERT INTO invoices (invoice_id, order_id, amount, currency, rate, status, created_at, expired_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, 'NEW', ?, ?, ?)"
)
_GET = (
    f"SELECT {_ORDER_COLUMNS}, {_INVOICE_COLUMNS} FROM orders o JOIN invoices i ON i.order_id = o.order_id"
    " WHERE o.order_id = ? AND o.user_id = ?"
)
_LIST = (
    f"SELECT {_ORDER_COLUMNS} FROM orders o WHERE o.user_id = ?"
    " ORDER BY o.created_at DESC, o.order_id DESC LIMIT ? OFFSET ?"
)


class DuplicateOrder(ValueError):
    """The merchant already has an order with this ``merchant_order_id``."""


def _iso(at: _dt.datetime) -> str:
    # Fixed width (always milliseconds, always +00:00): sorts as text in time order.
    return at.isoformat(timespec="milliseconds")


def _order(row: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "order_id": row[0],
        "user_id": row[1],
        "merchant_order_id": row[2],
        "title": row[3],
        "amount": Decimal(row[4]),
        "currency": row[5],
        "status": row[6],
        "created_at": _dt.datetime.fromisoformat(row[7]),
        "updated_at": _dt.datetime.fromisoformat(row[8]),
    }


def _invoice(row: tuple[Any, ...], order_id: str, merchant_order_id: str) -> dict[str, Any]:
    return {
        "invoice_id": row[0],
        "order_id": order_id,
        "merchant_order_id": merchant_order_id,
        "amount": Decimal(row[1]),
        "currency": row[2],
        "rate": Decimal(row[3]),
        "status": row[4],
        "created_at": _dt.datetime.fromisoformat(row[5]),
        "expired_at": _dt.datetime.fromisoformat(row[6]),
        "updated_at": _dt.datetime.fromisoformat(row[7]),
    }


class PlainOrders:
    """Orders with invoices over one SQLite file, one connection."""

    def __init__(self, path: str) -> None:
        # Autocommit mode: transactions are the explicit BEGIN IMMEDIATE ... COMMIT below.
        self._db = sqlite3.connect(path, isolation_level=None)
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise RuntimeError(f"could not switch {path} to WAL (got {mode})")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def create_order(
        self, user_id: int, *, currency: str, amount: Decimal, merchant_order_id: str, title: str | None = None
    ) -> dict[str, Any]:
        """Writes the order and its invoice in one transaction and returns both."""
        if not isinstance(amount, Decimal) or not amount.is_finite() or amount <= 0:
            raise ValueError("amount: must be a positive decimal.Decimal")
        if len(currency) != 3 or not currency.isalpha() or not currency.isupper():
            raise ValueError("currency: must be an upper-case ISO 4217 code")
        if not merchant_order_id:
            raise ValueError("merchant_order_id: required")
        if title is not None and len(title) > 200:
            raise ValueError("title: at most 200 characters")

        now = _dt.datetime.now(_UTC)
        created = _iso(now)
        expires = _iso(now + _INVOICE_TTL)
        order_id = str(uuid.uuid4())
        invoice_id = str(uuid.uuid4())
        coin_amount = (amount / _RATE).quantize(_COIN_STEP).normalize()

        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                _INSERT_ORDER, (order_id, user_id, merchant_order_id, title, str(amount), currency, created, created)
            )
            db.execute(
                _INSERT_INVOICE,
                (invoice_id, order_id, str(coin_amount), _PAY_CURRENCY, str(_RATE), created, expires, created),
            )
            db.execute("COMMIT")
        except sqlite3.IntegrityError as error:
            db.execute("ROLLBACK")
            raise DuplicateOrder(f"merchant_order_id {merchant_order_id!r} is taken") from error
        except BaseException:
            db.execute("ROLLBACK")
            raise

        at = _dt.datetime.fromisoformat(created)  # what a read returns: millisecond precision
        order = {
            "order_id": order_id,
            "user_id": user_id,
            "merchant_order_id": merchant_order_id,
            "title": title,
            "amount": amount,
            "currency": currency,
            "status": "NEW",
            "created_at": at,
            "updated_at": at,
        }
        invoice = {
            "invoice_id": invoice_id,
            "order_id": order_id,
            "merchant_order_id": merchant_order_id,
            "amount": coin_amount,
            "currency": _PAY_CURRENCY,
            "rate": _RATE,
            "status": "NEW",
            "created_at": at,
            "expired_at": _dt.datetime.fromisoformat(expires),
            "updated_at": at,
        }
        return {"order": order, "invoice": invoice}

    def get_order(self, user_id: int, order_id: str) -> dict[str, Any]:
        """The merchant's order joined with its invoice; ``KeyError`` when there is none."""
        row = self._db.execute(_GET, (order_id, user_id)).fetchone()
        if row is None:
            raise KeyError(order_id)
        order = _order(row)
        return {"order": order, "invoice": _invoice(row[9:], order["order_id"], order["merchant_order_id"])}

    def list_orders(self, user_id: int, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """The merchant's orders, newest first (``created_at DESC, order_id DESC``)."""
        if not 1 <= limit <= 50:
            raise ValueError("limit: must be from 1 to 50")
        return [_order(row) for row in self._db.execute(_LIST, (user_id, limit, offset))]
