-- coinorder schema version 3: webhook delivery state on the event outbox, the attempt
-- log, and the e-mail outbox.

-- pending: to be sent; delivered: a 2xx came back; failed: gave up (schedule exhausted,
-- 410 Gone, or a refused target); no_target: neither the order nor its key has a
-- webhook URL (redeliver after setting one).
ALTER TABLE events ADD COLUMN delivery_state TEXT NOT NULL DEFAULT 'pending'
    CHECK (delivery_state IN ('pending', 'delivered', 'failed', 'no_target'));
ALTER TABLE events ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN next_attempt_at INTEGER NOT NULL DEFAULT 0;
-- A claimed message is leased to one worker until lease_until; a worker that dies
-- mid-delivery leaves it to be retried once the lease runs out.
ALTER TABLE events ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN lease_token TEXT;
ALTER TABLE events ADD COLUMN delivered_at INTEGER;
ALTER TABLE events ADD COLUMN last_error TEXT;
CREATE INDEX events_due ON events (environment, delivery_state, next_attempt_at);

CREATE TABLE webhook_attempts (
    id               INTEGER PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES events (event_id),
    attempt          INTEGER NOT NULL,
    url              TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    status           INTEGER,
    latency_ms       INTEGER NOT NULL,
    response_excerpt TEXT,
    error            TEXT
) STRICT;
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
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    lease_until     INTEGER NOT NULL DEFAULT 0,
    lease_token     TEXT,
    last_error      TEXT,
    sent_at         INTEGER,
    created_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX emails_due ON emails (environment, state, next_attempt_at);
CREATE INDEX emails_by_order ON emails (order_id);
