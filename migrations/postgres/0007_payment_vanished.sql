-- coinorder PostgreSQL schema version 7 (as SQLite's version 12): whether a rejected
-- payment was rejected by the chain watcher because it vanished from the chain, the only
-- kind recorded anew when seen on the chain again.
ALTER TABLE payments ADD COLUMN vanished BOOLEAN NOT NULL DEFAULT FALSE;
