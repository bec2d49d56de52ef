-- coinorder schema version 9: the Get Orders indexes in ascending order.
-- Orders arrive in time order, so a (created_at DESC) index took every new order at its
-- far left, where SQLite splits pages in half and rewrites them: about 2 log pages per
-- create for each of the two indexes. Ascending, a new order lands at the right end,
-- which fills pages and appends (about 1.25 pages each), and Get Orders reads the same
-- index backwards for newest first, with no sort.
DROP INDEX IF EXISTS orders_by_merchant;
DROP INDEX IF EXISTS orders_by_merchant_status;
CREATE INDEX orders_by_merchant ON orders (user_id, environment, created_at, order_id);
CREATE INDEX orders_by_merchant_status ON orders (user_id, environment, status, created_at, order_id);
