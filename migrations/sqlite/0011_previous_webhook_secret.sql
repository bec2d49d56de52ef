-- coinorder schema version 11: a rotated webhook secret may go on signing for a while.
-- Until `previous_secret_until` (epoch milliseconds), webhooks carry a signature by the
-- previous secret beside the current one, so a receiver can switch secrets whenever it
-- is ready inside that window and no delivery fails verification meanwhile.
ALTER TABLE api_keys ADD COLUMN previous_secret_enc TEXT;
ALTER TABLE api_keys ADD COLUMN previous_secret_until INTEGER;
