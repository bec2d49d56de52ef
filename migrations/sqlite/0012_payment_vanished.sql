-- coinorder schema version 12: whether a rejected payment was rejected by the chain
-- watcher because it vanished from the chain (1), rather than by the host or because it
-- reverted (0). Only such a payment, seen on the chain again by any process, is recorded
-- anew (`txid:again-2`): money that came after all.
ALTER TABLE payments ADD COLUMN vanished INTEGER NOT NULL DEFAULT 0;
