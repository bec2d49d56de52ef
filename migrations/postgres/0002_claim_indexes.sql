-- coinorder PostgreSQL schema version 2: the outbox claim orders due messages by
-- (next_attempt_at, created_at[, sequence]); with the whole ORDER BY in the index the
-- claim reads the first due rows and stops at its LIMIT instead of sorting the backlog.
DROP INDEX IF EXISTS events_due;
CREATE INDEX events_due ON events (environment, delivery_state, next_attempt_at, created_at, sequence);
DROP INDEX IF EXISTS emails_due;
CREATE INDEX emails_due ON emails (environment, state, next_attempt_at, created_at);
