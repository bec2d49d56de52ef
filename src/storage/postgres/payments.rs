//! PostgreSQL twins of the methods in `storage/payments.rs`.
