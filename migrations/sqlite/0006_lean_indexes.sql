-- coinorder schema version 6: indexes that match the queries.
-- orders_by_environment_status served no query (expiry goes through invoices_by_expiry,
-- listing through orders_by_merchant*), yet every create and state change wrote it.
DROP INDEX IF EXISTS orders_by_environment_status;

-- The outbox claim orders due messages by (next_attempt_at, created_at[, sequence]):
-- with only next_attempt_at in the index, SQLite sorted every due message on each claim,
-- so a claim's cost grew with the backlog. With the whole ORDER BY in the index the
-- claim reads the first due rows and stops at its LIMIT.
DROP INDEX IF EXISTS events_due;
CREATE INDEX events_due ON events (environment, delivery_state, next_attempt_at, created_at, sequence);
DROP INDEX IF EXISTS emails_due;
CREATE INDEX emails_due ON emails (environment, state, next_attempt_at, created_at);
