-- coinorder PostgreSQL schema version 4: watch-only wallets (issue 14). The merchant's extended
-- public key per environment and coin; the service derives one deposit address per
-- invoice from it and its chain watcher looks for payments to those addresses.
CREATE TABLE wallets (
    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    coin        TEXT NOT NULL,
    -- The canonical descriptor (BTC) or account xpub (ETH, USDT, USDC): public keys only.
    descriptor  TEXT NOT NULL,
    account_id  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (environment, coin)
);

-- The next derivation index of each key, shared by the coins set to the same key (ETH and
-- USDT from one xpub never hand out one address twice). Taken by an UPDATE in the
-- order's own transaction, so an index is never reused or skipped; kept when a wallet is
-- removed, so setting the key again never hands out an address already shown.
CREATE TABLE wallet_accounts (
    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    account_id  TEXT NOT NULL,
    next_index  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (environment, account_id)
);

-- The index the invoice's address was derived at; NULL when it came from elsewhere (the
-- host's address source, the sandbox's fake addresses).
ALTER TABLE invoices ADD COLUMN derivation_index BIGINT;
-- What the chain watcher polls: open and recently expired invoices with derived addresses.
CREATE INDEX invoices_watched ON invoices (status, expired_at) WHERE derivation_index IS NOT NULL;
-- Unconfirmed payments, which the chain watcher follows until they confirm or vanish.
CREATE INDEX payments_unconfirmed ON payments (environment, seen_at) WHERE state = 'unconfirmed';

-- Where the Ethereum watcher's block scan goes on from, per environment and chain.
CREATE TABLE chain_cursors (
    environment TEXT NOT NULL CHECK (environment IN ('sandbox', 'live')),
    chain       TEXT NOT NULL,
    next_block  BIGINT NOT NULL,
    PRIMARY KEY (environment, chain)
);
