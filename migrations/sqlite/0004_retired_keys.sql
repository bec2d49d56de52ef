-- coinorder schema version 4: what a deleted key leaves behind.
-- A deleted key can never authenticate again (its hash is gone), but events of orders
-- it created must still be signed and delivered: its signing secret (sealed) and webhook
-- URL are kept here for that alone.
CREATE TABLE retired_keys (
    id                 TEXT PRIMARY KEY,
    user_id            INTEGER NOT NULL,
    environment        TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    webhook_url        TEXT,
    webhook_secret_enc TEXT NOT NULL,
    retired_at         INTEGER NOT NULL
) STRICT;
