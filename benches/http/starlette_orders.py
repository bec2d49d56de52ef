"""The Python baseline of scripts/bench-http-python: what a merchant would write instead
of coinorder, the way the performance issue describes it. Starlette served by uvicorn
(2 worker processes), one sqlite3 connection per process in WAL mode with
synchronous=FULL (the same durability as coinorder's default), API keys looked up by
their SHA-256, exact decimals, and the same three calls:

    POST /v1/orders          {"currency":"USD","amount":"10.00"} -> 201 with the order
    GET  /v1/orders/{id}     the merchant's order -> 200

A benchmark baseline, not a reference implementation: it prices in a fixed rate and
skips the spec's other rules.
Environment: BENCH_DB (the database file), BENCH_KEY_HASH (hex SHA-256 of the key it
accepts, for user 1; written into the database by `init`).
"""

import hashlib
import json
import os
import sqlite3
import sys
import time
import uuid
from decimal import ROUND_UP, Decimal, InvalidOperation

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

DB = os.environ.get("BENCH_DB", "bench.db")
RATE = Decimal("1")  # USD per USDT
SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (key_hash TEXT PRIMARY KEY, user_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY, user_id INTEGER NOT NULL, merchant_order_id TEXT NOT NULL,
    amount TEXT NOT NULL, currency TEXT NOT NULL, pay_amount TEXT NOT NULL,
    pay_currency TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL,
    expired_at INTEGER NOT NULL, UNIQUE (user_id, merchant_order_id));
"""


def connect() -> sqlite3.Connection:
    conn = sqlite3.connect(DB, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=5000")
    return conn


CONN = None


def conn() -> sqlite3.Connection:
    global CONN
    if CONN is None:
        CONN = connect()
    return CONN


def error(status: int, code: str, message: str) -> Response:
    body = json.dumps({"status": status, "error_code": code, "error": message})
    return Response(body, status_code=status, media_type="application/json")


def user_of(request: Request):
    key = request.headers.get("x-api-key")
    if not key:
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()
    row = conn().execute("SELECT user_id FROM api_keys WHERE key_hash = ?", (digest,)).fetchone()
    return row[0] if row else None


def order_json(row) -> dict:
    order_id, user_id, moid, amount, currency, pay_amount, pay_currency, status, created, expires = row
    return {
        "order_id": order_id,
        "user_id": user_id,
        "merchant_order_id": moid,
        "price_amount": amount,
        "price_currency": currency,
        "pay_amount": pay_amount,
        "pay_currency": pay_currency,
        "status": status,
        "created_at": created,
        "expired_at_t": expires,
    }


async def create(request: Request) -> Response:
    user = user_of(request)
    if user is None:
        return error(401, "Unauthorized", "API credentials are not valid")
    try:
        body = json.loads(await request.body(), parse_float=Decimal)
        amount = Decimal(str(body["amount"]))
        currency = str(body["currency"]).upper()
    except (ValueError, KeyError, InvalidOperation, TypeError):
        return error(400, "PARAMETERS_MISSING", "amount and currency are required")
    if amount <= 0 or len(currency) != 3:
        return error(400, "PARAMETERS_MISSING", "amount: must be positive")
    pay_amount = (amount / RATE).quantize(Decimal("0.000001"), rounding=ROUND_UP)
    now = int(time.time() * 1000)
    row = (str(uuid.uuid4()), user, body.get("merchant_order_id") or "ord_" + uuid.uuid4().hex,
           str(amount.normalize()), currency, str(pay_amount.normalize()), "USDT", "NEW", now, now + 1_800_000)
    db = conn()
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?,?)", row)
        db.execute("COMMIT")
    except sqlite3.IntegrityError:
        db.execute("ROLLBACK")
        return error(400, "ORDER_DUPLICATE", "merchant_order_id is already used")
    body = json.dumps({"status": 201, "message": "Order created successfully", "data": order_json(row)})
    return Response(body, status_code=201, media_type="application/json")


async def get(request: Request) -> Response:
    user = user_of(request)
    if user is None:
        return error(401, "Unauthorized", "API credentials are not valid")
    row = conn().execute("SELECT * FROM orders WHERE order_id = ? AND user_id = ?",
                         (request.path_params["order_id"], user)).fetchone()
    if row is None:
        return error(400, "ORDER_NOT_VALID", "order not found")
    return Response(json.dumps({"status": 200, "order": order_json(row)}), media_type="application/json")


app = Starlette(routes=[Route("/v1/orders", create, methods=["POST"]),
                        Route("/v1/orders/{order_id}", get, methods=["GET"])])

if __name__ == "__main__" and sys.argv[1:2] == ["init"]:
    # init KEY: the schema and the one accepted key.
    db = connect()
    db.executescript(SCHEMA)
    db.execute("INSERT OR REPLACE INTO api_keys VALUES (?, 1)", (hashlib.sha256(sys.argv[2].encode()).hexdigest(),))
