//! PostgreSQL twins of the methods in `storage/delivery.rs`.
