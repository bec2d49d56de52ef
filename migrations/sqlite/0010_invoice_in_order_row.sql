-- coinorder schema version 10: each order's invoice lives in the order's own row.
-- An order has exactly one invoice, created in the same transaction and read with it on
-- every Get Order, yet as a table of its own it cost every create three more B-trees (the
-- table and its two unique indexes, on invoice_id and order_id), about 3.5 of the 11.2
-- log pages a create wrote. In the order's row they cost none; invoice columns whose
-- names the order already uses carry an `invoice_` prefix.
ALTER TABLE orders ADD COLUMN invoice_id TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN invoice_amount TEXT NOT NULL DEFAULT '0';
ALTER TABLE orders ADD COLUMN invoice_currency TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN rate TEXT NOT NULL DEFAULT '0';
ALTER TABLE orders ADD COLUMN invoice_status TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN receive_amount TEXT NOT NULL DEFAULT '0';
ALTER TABLE orders ADD COLUMN invoice_receive_currency TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN invoice_created_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN expired_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN invoice_updated_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN address TEXT NOT NULL DEFAULT '';
ALTER TABLE orders ADD COLUMN payment_uri TEXT NOT NULL DEFAULT '';
-- The index the invoice's address was derived at; NULL when it came from elsewhere.
ALTER TABLE orders ADD COLUMN derivation_index INTEGER;

UPDATE orders
   SET invoice_id = i.invoice_id, invoice_amount = i.amount, invoice_currency = i.currency, rate = i.rate,
       invoice_status = i.status, receive_amount = i.receive_amount,
       invoice_receive_currency = i.receive_currency, invoice_created_at = i.created_at,
       expired_at = i.expired_at, invoice_updated_at = i.updated_at, address = i.address,
       payment_uri = i.payment_uri, derivation_index = i.derivation_index
  FROM invoices i
 WHERE i.order_id = orders.order_id;

DROP INDEX IF EXISTS invoices_by_expiry;
DROP INDEX IF EXISTS invoices_watched;
DROP TABLE invoices;

-- The expiry worker's due quotes, by status and deadline.
CREATE INDEX orders_by_expiry ON orders (invoice_status, expired_at);
-- What the chain watcher polls: open and recently expired invoices with derived addresses.
CREATE INDEX orders_watched ON orders (invoice_status, expired_at) WHERE derivation_index IS NOT NULL;
