//! Clients of the chains `serve` watches for live payments: an Esplora-compatible HTTP
//! API for Bitcoin ([`esplora`]) and an Ethereum JSON-RPC node ([`ethereum`]).
//!
//! They only fetch and parse what a chain says; deciding what a sighting means for an
//! order (record, confirm, reject) is the service's chain watcher
//! (`Service::watch_chain_due`).

pub mod esplora;
pub mod ethereum;

/// What messages and `Debug` show of an endpoint URL: its scheme, host and port only.
/// Hosted Esplora and Ethereum RPC URLs carry API keys in their path, query or user
/// info, and a key must never reach a log.
pub fn endpoint_for_display(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(url) => match (url.host_str(), url.port()) {
            (Some(host), Some(port)) => format!("{}://{host}:{port}", url.scheme()),
            (Some(host), None) => format!("{}://{host}", url.scheme()),
            _ => format!("{}://(no host)", url.scheme()),
        },
        Err(_) => "(unparsable URL)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::endpoint_for_display;

    #[test]
    fn an_endpoint_is_shown_without_its_credentials_path_or_query() {
        let shown = endpoint_for_display("https://user:secret@rpc.example:8545/v3/KEY123?apikey=Q");
        assert_eq!(shown, "https://rpc.example:8545");
        assert_eq!(endpoint_for_display("https://blockstream.info/api"), "https://blockstream.info");
        assert_eq!(endpoint_for_display("not a url secret"), "(unparsable URL)");
    }
}
