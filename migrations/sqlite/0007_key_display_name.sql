-- coinorder schema version 7: the merchant's name as the payment page shows it, per key
-- (set with `coinorder keys set-name`); NULL shows none.
ALTER TABLE api_keys ADD COLUMN display_name TEXT;
