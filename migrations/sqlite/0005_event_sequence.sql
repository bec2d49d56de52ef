-- coinorder schema version 5: the per-order event counter.
-- An event's `sequence` is taken by incrementing this column in the transaction that
-- writes the event (UPDATE ... RETURNING), not computed as MAX(sequence) + 1: with more
-- than one writer (PostgreSQL) two transactions could read the same MAX and collide,
-- while the UPDATE makes the second wait on the first's row lock.
ALTER TABLE orders ADD COLUMN last_event_sequence INTEGER NOT NULL DEFAULT 0;

-- Existing orders continue where their events stopped.
UPDATE orders
   SET last_event_sequence = (SELECT COALESCE(MAX(sequence), 0) FROM events WHERE events.order_id = orders.order_id);
