-- coinorder PostgreSQL schema version 1: the whole schema of the SQLite migrations 1 to 5
-- (migrations/sqlite/), in PostgreSQL's types. Money columns hold exact decimal text and
-- times are Unix epoch milliseconds, exactly as on SQLite, so both backends read and
-- write the same values.

CREATE TABLE api_keys (
    id                 TEXT PRIMARY KEY,
    user_id            BIGINT NOT NULL,
    environment        TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    key_hash           BYTEA NOT NULL UNIQUE,
    key_hint           TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('active', 'inactive')),
    webhook_url        TEXT,
    webhook_secret_enc TEXT NOT NULL,
    created_at         BIGINT NOT NULL,
    last_used_at       BIGINT
);

CREATE TABLE orders (
    order_id            TEXT PRIMARY KEY,
    environment         TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    user_id             BIGINT NOT NULL,
    key_id              TEXT NOT NULL,
    merchant_order_id   TEXT NOT NULL,
    title               TEXT,
    description         TEXT,
    callback_url        TEXT,
    webhook_url         TEXT,
    success_url         TEXT,
    cancel_url          TEXT,
    customer_email      TEXT,
    amount              TEXT NOT NULL,
    currency            TEXT NOT NULL,
    receive_currency    TEXT NOT NULL DEFAULT '',
    status              TEXT NOT NULL,
    request_hash        BYTEA NOT NULL,
    create_response     TEXT NOT NULL,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    deleted             BIGINT NOT NULL DEFAULT 0,
    marked_paid         BIGINT NOT NULL DEFAULT 0,
    last_event_sequence BIGINT NOT NULL DEFAULT 0,
    UNIQUE (user_id, environment, merchant_order_id)
);
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
    created_at       BIGINT NOT NULL,
    expired_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    address          TEXT NOT NULL DEFAULT '',
    payment_uri      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX invoices_by_expiry ON invoices (status, expired_at);

CREATE TABLE payments (
    environment  TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    txid         TEXT NOT NULL,
    order_id     TEXT NOT NULL REFERENCES orders (order_id),
    amount       TEXT NOT NULL,
    currency     TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('unconfirmed', 'confirmed', 'rejected')),
    counts       BIGINT NOT NULL,
    seen_at      BIGINT NOT NULL,
    settled_at   BIGINT,
    PRIMARY KEY (environment, txid)
);
CREATE INDEX payments_by_order ON payments (order_id);

CREATE TABLE events (
    event_id        TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL REFERENCES orders (order_id),
    environment     TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    sequence        BIGINT NOT NULL,
    type            TEXT NOT NULL,
    previous_status TEXT NOT NULL,
    status          TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    delivery_state  TEXT NOT NULL DEFAULT 'pending'
        CHECK (delivery_state IN ('pending', 'delivered', 'failed', 'no_target')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    lease_until     BIGINT NOT NULL DEFAULT 0,
    lease_token     TEXT,
    delivered_at    BIGINT,
    last_error      TEXT,
    UNIQUE (order_id, sequence)
);
CREATE INDEX events_by_time ON events (environment, created_at);
CREATE INDEX events_due ON events (environment, delivery_state, next_attempt_at);

CREATE TABLE rates (
    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    crypto      TEXT NOT NULL,
    fiat        TEXT NOT NULL,
    rate        TEXT NOT NULL,
    valid_until BIGINT,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (environment, crypto, fiat)
);

CREATE TABLE webhook_attempts (
    id               BIGSERIAL PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (event_id),
    attempt          BIGINT NOT NULL,
    url              TEXT NOT NULL,
    started_at       BIGINT NOT NULL,
    status           BIGINT,
    latency_ms       BIGINT NOT NULL,
    response_excerpt TEXT,
    error            TEXT
);
CREATE INDEX webhook_attempts_by_event ON webhook_attempts (event_id, attempt);

CREATE TABLE emails (
    email_id        TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL REFERENCES orders (order_id),
    environment     TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    recipient       TEXT NOT NULL,
    subject         TEXT NOT NULL,
    text_body       TEXT NOT NULL,
    html_body       TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    lease_until     BIGINT NOT NULL DEFAULT 0,
    lease_token     TEXT,
    last_error      TEXT,
    sent_at         BIGINT,
    created_at      BIGINT NOT NULL
);
CREATE INDEX emails_due ON emails (environment, state, next_attempt_at);
CREATE INDEX emails_by_order ON emails (order_id);

CREATE TABLE retired_keys (
    id                 TEXT PRIMARY KEY,
    user_id            BIGINT NOT NULL,
    environment        TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    webhook_url        TEXT,
    webhook_secret_enc TEXT NOT NULL,
    retired_at         BIGINT NOT NULL
);
