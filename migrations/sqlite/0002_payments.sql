-- coinorder schema version 2: payments, the event outbox, host-set rates and deposit
-- addresses.

ALTER TABLE invoices ADD COLUMN address TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN payment_uri TEXT NOT NULL DEFAULT '';
-- 1 once the merchant accepted a late or short payment with mark_paid.
ALTER TABLE orders ADD COLUMN marked_paid INTEGER NOT NULL DEFAULT 0;

-- Payments toward an order's invoice, keyed by transaction id (recording one twice is a no-op).
CREATE TABLE payments (
    environment  TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    txid         TEXT NOT NULL,
    order_id     TEXT NOT NULL REFERENCES orders (order_id),
    amount       TEXT NOT NULL,
    currency     TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('unconfirmed', 'confirmed', 'rejected')),
    -- 1 when first seen while the quote was open; only those pay the invoice automatically.
    counts       INTEGER NOT NULL,
    seen_at      INTEGER NOT NULL,
    settled_at   INTEGER,
    PRIMARY KEY (environment, txid)
) STRICT;
CREATE INDEX payments_by_order ON payments (order_id);

-- The transactional outbox: one row per state change, written in the same transaction.
CREATE TABLE events (
    event_id        TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL REFERENCES orders (order_id),
    environment     TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    sequence        INTEGER NOT NULL,
    type            TEXT NOT NULL,
    previous_status TEXT NOT NULL,
    status          TEXT NOT NULL,
    payload         TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    UNIQUE (order_id, sequence)
) STRICT;
CREATE INDEX events_by_time ON events (environment, created_at);

-- Exchange rates set by the host: fiat units per one coin.
CREATE TABLE rates (
    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    crypto      TEXT NOT NULL,
    fiat        TEXT NOT NULL,
    rate        TEXT NOT NULL,
    valid_until INTEGER,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (environment, crypto, fiat)
) STRICT;

CREATE INDEX orders_by_environment_status ON orders (environment, status);
