//! Clients of the chains `serve` watches for live payments: an Esplora-compatible HTTP
//! API for Bitcoin ([`esplora`]) and an Ethereum JSON-RPC node ([`ethereum`]).
//!
//! They only fetch and parse what a chain says; deciding what a sighting means for an
//! order (record, confirm, reject) is the service's chain watcher
//! (`Service::watch_chain_due`).

pub mod esplora;
pub mod ethereum;
