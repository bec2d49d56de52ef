-- coinorder schema version 1: API keys, orders and their invoices.
-- Money columns hold exact decimal text; times are Unix epoch milliseconds.

CREATE TABLE api_keys (
    id                 TEXT PRIMARY KEY,
    user_id            INTEGER NOT NULL,
    environment        TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    key_hash           BLOB NOT NULL UNIQUE,
    key_hint           TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('active', 'inactive')),
    webhook_url        TEXT,
    webhook_secret_enc TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    last_used_at       INTEGER
) STRICT;

CREATE TABLE orders (
    order_id          TEXT PRIMARY KEY,
    environment       TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    user_id           INTEGER NOT NULL,
    key_id            TEXT NOT NULL,
    merchant_order_id TEXT NOT NULL,
    title             TEXT,
    description       TEXT,
    callback_url      TEXT,
    webhook_url       TEXT,
    success_url       TEXT,
    cancel_url        TEXT,
    customer_email    TEXT,
    amount            TEXT NOT NULL,
    currency          TEXT NOT NULL,
    receive_currency  TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    request_hash      BLOB NOT NULL,
    create_response   TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    deleted           INTEGER NOT NULL DEFAULT 0,
    UNIQUE (user_id, environment, merchant_order_id)
) STRICT;

-- Get Orders: newest first, optionally by status.
CREATE INDEX orders_by_merchant ON orders (user_id, environment, created_at DESC, order_id DESC);
CREATE INDEX orders_by_merchant_status ON orders (user_id, environment, status, created_at DESC, order_id DESC);

CREATE TABLE invoices (
    invoice_id       TEXT PRIMARY KEY,
    order_id         TEXT NOT NULL UNIQUE REFERENCES orders (order_id),
    amount           TEXT NOT NULL,
    currency         TEXT NOT NULL,
    rate             TEXT NOT NULL,
    status           TEXT NOT NULL,
    receive_amount   TEXT NOT NULL DEFAULT '0',
    receive_currency TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    expired_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
) STRICT;

CREATE INDEX invoices_by_expiry ON invoices (status, expired_at);
