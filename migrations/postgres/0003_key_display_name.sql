-- coinorder PostgreSQL schema version 3: the merchant's name as the payment page shows
-- it, per key (set with `coinorder keys set-name`); NULL shows none.
ALTER TABLE api_keys ADD COLUMN display_name TEXT;
