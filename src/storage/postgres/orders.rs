//! PostgreSQL twins of the methods in `storage/orders.rs`.
