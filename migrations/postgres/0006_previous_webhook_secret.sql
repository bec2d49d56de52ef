-- coinorder PostgreSQL schema version 6: a rotated webhook secret may go on signing for
-- a while (as SQLite's version 11). Until `previous_secret_until` (epoch milliseconds),
-- webhooks carry a signature by the previous secret beside the current one.
ALTER TABLE api_keys
    ADD COLUMN previous_secret_enc TEXT,
    ADD COLUMN previous_secret_until BIGINT;
