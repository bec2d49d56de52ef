-- coinorder PostgreSQL schema version 5: the Get Orders indexes in ascending order.
-- Orders arrive in time order: a (created_at DESC) index took every new order at its
-- leftmost leaf, which PostgreSQL splits in half, leaving half-empty pages behind. In
-- ascending order a new order goes to the rightmost leaf (split 90/10 and cached for
-- the next insert), and Get Orders scans the index backwards for newest first.
DROP INDEX IF EXISTS orders_by_merchant;
DROP INDEX IF EXISTS orders_by_merchant_status;
CREATE INDEX orders_by_merchant ON orders (user_id, environment, created_at, order_id);
CREATE INDEX orders_by_merchant_status ON orders (user_id, environment, status, created_at, order_id);
