//! PostgreSQL twins of the methods in `storage/keys.rs`.
