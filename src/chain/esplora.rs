//! A small synchronous client for an Esplora-compatible HTTP API: Blockstream's electrs,
//! the API of blockstream.info and mempool.space, or one run next to a node.
//!
//! It reads three things: the tip height, the payments to an address and where one
//! transaction stands. Amounts stay integers (satoshis) until [`sats_to_btc`] turns them
//! into an exact [`Decimal`].
//!
//! Hosted endpoints often carry an API key in the URL's path, query or userinfo, so
//! neither a [`ChainError`] nor the client's `Debug` ever shows more of the URL than
//! `scheme://host:port`. Userinfo is sent as HTTP Basic authentication, as curl would.

use std::fmt;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Deserialize;

use super::{Endpoint, EndpointError};

/// The largest answer read: the address history of a fresh invoice address is a few
/// kilobytes, and even a full page (50 mempool + 25 confirmed transactions) of large
/// transactions stays well below this.
const MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;

/// How much of an error answer's body a [`ChainError`] quotes.
const EXCERPT_CHARS: usize = 120;

/// What electrs (`Transaction not found`) and the mempool.space backend (`No such
/// mempool or blockchain transaction`) say in a 404 for a transaction they do not know.
/// Any other 404 (a proxy's page for a wrong base URL) must not read as "dropped".
const NOT_FOUND_ANSWERS: [&str; 2] = ["transaction not found", "no such mempool or blockchain transaction"];

/// Something a chain endpoint did wrong or could not be reached.
///
/// The message names the endpoint only by `scheme://host:port`: never the URL's path,
/// query or userinfo, where hosted Esplora and RPC endpoints keep their API keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    message: String,
}

impl ChainError {
    /// An error with this message; the caller keeps secrets (full URLs) out of it.
    pub(crate) fn new(message: impl Into<String>) -> ChainError {
        ChainError { message: message.into() }
    }

    /// The human-readable description.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ChainError {}

/// A payment to one address seen by the Esplora API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitcoinPayment {
    /// The transaction's id (64 lowercase hex digits, as Esplora spells it).
    pub txid: String,
    /// The index of the transaction's first output to the address: with the txid, the
    /// outpoint that names this payment even when one transaction (a batch payout) pays
    /// several invoices.
    pub vout: u32,
    /// Sum of this transaction's outputs to the address, in satoshis.
    pub sats: u64,
    /// Height of the block that holds it; None while in the mempool.
    pub block_height: Option<u64>,
    /// That block's time (Unix seconds, as its miner stamped it); None in the mempool.
    pub block_time: Option<u64>,
}

/// Where a transaction stands according to the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionStatus {
    /// The API does not know the transaction (any more): it was replaced (RBF), evicted or
    /// never relayed.
    Missing,
    /// In the mempool.
    Unconfirmed,
    /// In a block of the API's best chain.
    Confirmed {
        /// Height of that block.
        block_height: u64,
    },
}

/// A client of one Esplora-compatible API.
pub struct EsploraClient {
    agent: ureq::Agent,
    /// The base URL; requests append path segments to its URL, so a query string (an API
    /// key) stays at the end of every request URL. Errors and `Debug` show only its origin.
    endpoint: Endpoint,
    body_limit: u64,
}

impl fmt::Debug for EsploraClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EsploraClient").field("origin", &self.endpoint.origin()).finish_non_exhaustive()
    }
}

/// The fields of a transaction status (`/tx/:txid/status`, or `status` in a
/// transaction) this client reads.
#[derive(Debug, Deserialize)]
struct StatusJson {
    confirmed: bool,
    #[serde(default)]
    block_height: Option<u64>,
    #[serde(default)]
    block_time: Option<u64>,
}

/// The fields of an Esplora transaction this client reads; the others are ignored.
#[derive(Debug, Deserialize)]
struct TransactionJson {
    txid: String,
    vout: Vec<OutputJson>,
    status: StatusJson,
}

/// Transactions on a full page of an address's history.
const CHAIN_PAGE: usize = 25;
/// Most further pages of an address's confirmed history read: 250 older transactions,
/// far more than an invoice address sees, and a bound on what dust can cost a pass.
const MAX_CHAIN_PAGES: usize = 10;

/// An output: OP_RETURN and other non-standard scripts have no address.
#[derive(Debug, Deserialize)]
struct OutputJson {
    #[serde(default)]
    scriptpubkey_address: Option<String>,
    value: u64,
}

/// `GET /tx/:txid` when only its id and status matter.
#[derive(Debug, Deserialize)]
struct TransactionStatusJson {
    txid: String,
    status: StatusJson,
}

impl EsploraClient {
    /// A client of the API at `base_url`, like `https://blockstream.info/api` or
    /// `http://127.0.0.1:3002` (a trailing slash is optional), whose every request
    /// (connecting, sending, reading the answer) ends within `timeout`.
    ///
    /// Redirects are not followed: an API that moved is a configuration error to see,
    /// not something to chase with the API key attached.
    pub fn new(base_url: &str, timeout: Duration) -> Result<EsploraClient, ChainError> {
        let endpoint = Endpoint::parse(base_url).map_err(|e| match e {
            EndpointError::Invalid(e) => ChainError::new(format!("invalid Esplora URL: {e}")),
            EndpointError::Scheme { scheme, .. } => {
                ChainError::new(format!("Esplora URL must be http or https, not {scheme}"))
            }
            EndpointError::NoHost { .. } => ChainError::new("Esplora URL has no host"),
        })?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(timeout))
            .user_agent("coinorder-chain-watcher")
            .build();
        Ok(EsploraClient { agent: crate::http_client::agent(config), endpoint, body_limit: MAX_BODY_BYTES })
    }

    /// The height of the API's best block: `GET /blocks/tip/height` (a plain-text integer).
    pub fn tip_height(&self) -> Result<u64, ChainError> {
        const ROUTE: &str = "GET /blocks/tip/height";
        let (status, body) = self.get(ROUTE, &["blocks", "tip", "height"])?;
        let body = self.success(ROUTE, status, body)?;
        std::str::from_utf8(&body)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| self.error(ROUTE, "the answer is not a block height"))
    }

    /// The hash of the block at `height`: `GET /block-height/:height` (plain text);
    /// `None` when the API has no block there (a 404), as for a height past its tip.
    pub fn block_at(&self, height: u64) -> Result<Option<String>, ChainError> {
        const ROUTE: &str = "GET /block-height/:height";
        let (status, body) = self.get(ROUTE, &["block-height", &height.to_string()])?;
        if status == 404 {
            return Ok(None);
        }
        let body = self.success(ROUTE, status, body)?;
        match std::str::from_utf8(&body).map(str::trim) {
            Ok(hash) if is_valid_txid(hash) => Ok(Some(hash.to_ascii_lowercase())),
            _ => Err(self.error(ROUTE, "the answer is not a block hash")),
        }
    }

    /// Every transaction, in the mempool or confirmed, with at least one output to
    /// `address`, newest first (the API's order): `GET /address/:address/txs`.
    ///
    /// `sats` is the sum of the transaction's outputs to the address (a payer may split a
    /// payment); a transaction that only spends from the address is not a payment to it.
    ///
    /// Blockstream's electrs answers up to 50 mempool transactions plus the 25 newest
    /// confirmed ones (mempool.space's fork 25 in all, mempool first); older confirmed
    /// ones are on further pages of 25 (`/address/:address/txs/chain/:last_seen_txid`),
    /// read while a page is full, up to 10 of them. An invoice address
    /// is fresh and sees a handful of transactions, but anyone who knows it can send it
    /// dust, and a payment pushed off the first page by 25 of those would go unseen.
    pub fn payments_to(&self, address: &str) -> Result<Vec<BitcoinPayment>, ChainError> {
        const ROUTE: &str = "GET /address/:address/txs";
        const CHAIN_ROUTE: &str = "GET /address/:address/txs/chain/:last_seen_txid";
        if !is_valid_address(address) {
            return Err(ChainError::new("not a Bitcoin address: only bech32 or base58 characters are allowed"));
        }
        let mut transactions = self.transactions(ROUTE, &["address", address, "txs"])?;
        let mut page = transactions.len();
        for _ in 0..MAX_CHAIN_PAGES {
            // A full page (25 transactions at least; mempool.space's first page counts its
            // mempool ones among the 25) ending with a confirmed one may have more after it.
            let last = match transactions.last() {
                Some(last) if page >= CHAIN_PAGE && last.status.confirmed => last.txid.clone(),
                _ => break,
            };
            if !is_valid_txid(&last) {
                return Err(self.error(CHAIN_ROUTE, "a transaction id in the answer is not 64 hexadecimal digits"));
            }
            let older = self.transactions(CHAIN_ROUTE, &["address", address, "txs", "chain", &last])?;
            page = older.len();
            transactions.extend(older);
        }
        payments_in(transactions, address).map_err(|detail| self.error(ROUTE, &detail))
    }

    /// One page of an address's transactions, at the URL `segments` make.
    fn transactions(&self, route: &str, segments: &[&str]) -> Result<Vec<TransactionJson>, ChainError> {
        let (status, body) = self.get(route, segments)?;
        let body = self.success(route, status, body)?;
        serde_json::from_slice(&body).map_err(|e| self.error(route, &format!("unexpected answer: {e}")))
    }

    /// Where transaction `txid` stands: `GET /tx/:txid/status`, then `GET /tx/:txid` when
    /// that says unconfirmed.
    ///
    /// The second request is needed because servers answer differently for a transaction
    /// they do not know (replaced or dropped): electrs, Blockstream's and mempool.space's
    /// fork alike, answers the status with `{"confirmed":false}` (it only looks for a
    /// confirming block) and gives its 404 (`Transaction not found`) only for the
    /// transaction itself, while the mempool backend over bitcoind or Electrum answers the
    /// status with a 404 (`No such mempool or blockchain transaction`). A 404 with any
    /// other body (a proxy's page for a wrong base URL) is an error, not `Missing`.
    pub fn transaction_status(&self, txid: &str) -> Result<TransactionStatus, ChainError> {
        const STATUS_ROUTE: &str = "GET /tx/:txid/status";
        const TX_ROUTE: &str = "GET /tx/:txid";
        if !is_valid_txid(txid) {
            return Err(ChainError::new("not a transaction id: 64 hexadecimal digits expected"));
        }
        let txid = txid.to_ascii_lowercase();

        let (status, body) = self.get(STATUS_ROUTE, &["tx", &txid, "status"])?;
        if status == 404 {
            return self.missing(STATUS_ROUTE, &body);
        }
        let body = self.success(STATUS_ROUTE, status, body)?;
        let answer: StatusJson =
            serde_json::from_slice(&body).map_err(|e| self.error(STATUS_ROUTE, &format!("unexpected answer: {e}")))?;
        if answer.confirmed {
            return confirmed(&answer).map_err(|detail| self.error(STATUS_ROUTE, &detail));
        }

        let (status, body) = self.get(TX_ROUTE, &["tx", &txid])?;
        if status == 404 {
            return self.missing(TX_ROUTE, &body);
        }
        let body = self.success(TX_ROUTE, status, body)?;
        let answer: TransactionStatusJson =
            serde_json::from_slice(&body).map_err(|e| self.error(TX_ROUTE, &format!("unexpected answer: {e}")))?;
        if !answer.txid.eq_ignore_ascii_case(&txid) {
            return Err(self.error(TX_ROUTE, "the answer is about another transaction"));
        }
        // It may have been mined between the two requests.
        confirmed(&answer.status).map_err(|detail| self.error(TX_ROUTE, &detail))
    }

    /// Sends `GET base/segments...` and reads the whole answer (up to the body limit).
    fn get(&self, route: &str, segments: &[&str]) -> Result<(u16, Vec<u8>), ChainError> {
        let mut url = self.endpoint.url().clone();
        url.path_segments_mut()
            .map_err(|()| self.error(route, "the base URL cannot take a path"))?
            .pop_if_empty()
            .extend(segments);
        let mut request = self.agent.get(url.as_str());
        if let Some(authorization) = self.endpoint.authorization() {
            request = request.header("authorization", authorization);
        }
        let mut response = request.call().map_err(|e| self.error(route, &transport_error(&e)))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(self.body_limit)
            .read_to_vec()
            .map_err(|e| self.error(route, &transport_error(&e)))?;
        Ok((status, body))
    }

    /// The body of a 2xx answer; any other status is an error.
    fn success(&self, route: &str, status: u16, body: Vec<u8>) -> Result<Vec<u8>, ChainError> {
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(self.status_error(route, status, &body))
        }
    }

    /// An error naming `status` and quoting the start of the answer (electrs explains a
    /// 400 there, e.g. an address of another network).
    fn status_error(&self, route: &str, status: u16, body: &[u8]) -> ChainError {
        // Blanked before it is cut: a cut inside a secret would leave its start unblanked.
        let text = self.endpoint.scrub(&String::from_utf8_lossy(body));
        let excerpt: String =
            text.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(EXCERPT_CHARS).collect();
        let detail = match (status, excerpt.is_empty()) {
            (300..=399, _) => format!("answered HTTP {status} (redirects are not followed)"),
            (_, true) => format!("answered HTTP {status}"),
            (_, false) => format!("answered HTTP {status}: {excerpt}"),
        };
        self.error(route, &detail)
    }

    /// A 404: the transaction is unknown if the body says so, an error otherwise.
    fn missing(&self, route: &str, body: &[u8]) -> Result<TransactionStatus, ChainError> {
        let text = String::from_utf8_lossy(body).to_ascii_lowercase();
        if NOT_FOUND_ANSWERS.iter().any(|answer| text.contains(answer)) {
            Ok(TransactionStatus::Missing)
        } else {
            Err(self.status_error(route, 404, body))
        }
    }

    /// An error about `route` naming the endpoint by origin, with secrets blanked out of
    /// `detail` (which may quote the server).
    fn error(&self, route: &str, detail: &str) -> ChainError {
        ChainError::new(format!("Esplora at {}: {route}: {}", self.endpoint.origin(), self.endpoint.scrub(detail)))
    }
}

/// The payments to `address` among `transactions`, or what is wrong with the answer.
fn payments_in(transactions: Vec<TransactionJson>, address: &str) -> Result<Vec<BitcoinPayment>, String> {
    let mut payments: Vec<BitcoinPayment> = Vec::new();
    for transaction in transactions {
        if !is_valid_txid(&transaction.txid) {
            return Err("a transaction id in the answer is not 64 hexadecimal digits".to_string());
        }
        let Some(vout) = transaction.vout.iter().position(|output| output_pays(output, address)) else {
            continue;
        };
        let vout = u32::try_from(vout).map_err(|_| format!("transaction {} has too many outputs", transaction.txid))?;
        let sats = transaction
            .vout
            .iter()
            .filter(|output| output_pays(output, address))
            .map(|output| output.value)
            .try_fold(0u64, u64::checked_add)
            .ok_or_else(|| format!("transaction {} pays more than 2^64 satoshis", transaction.txid))?;
        let block_height = match confirmed(&transaction.status)? {
            TransactionStatus::Confirmed { block_height } => Some(block_height),
            _ => None,
        };
        let block_time = block_height.and(transaction.status.block_time);
        let payment =
            BitcoinPayment { txid: transaction.txid.to_ascii_lowercase(), vout, sats, block_height, block_time };
        // The mempool and chain halves of the history are read one after the other, so a
        // transaction mined in between can be in both (only newer Blockstream electrs
        // merges them).
        match payments.iter_mut().find(|seen| seen.txid == payment.txid) {
            Some(seen) => {
                seen.block_height = seen.block_height.or(payment.block_height);
                seen.block_time = seen.block_time.or(payment.block_time);
            }
            None => payments.push(payment),
        }
    }
    Ok(payments)
}

fn output_pays(output: &OutputJson, address: &str) -> bool {
    match &output.scriptpubkey_address {
        // Bech32 is case-insensitive (Esplora answers in lowercase); base58 is not.
        Some(paid) if is_bech32(address) => paid.eq_ignore_ascii_case(address),
        Some(paid) => paid == address,
        None => false,
    }
}

/// `Confirmed` or `Unconfirmed` from a status, which must name its block's height when
/// confirmed.
fn confirmed(status: &StatusJson) -> Result<TransactionStatus, String> {
    match (status.confirmed, status.block_height) {
        (true, Some(block_height)) => Ok(TransactionStatus::Confirmed { block_height }),
        (true, None) => Err("a confirmed transaction without block_height".to_string()),
        (false, _) => Ok(TransactionStatus::Unconfirmed),
    }
}

/// Satoshis as an exact BTC amount (8 decimal places).
///
/// `Some` for every `u64` (a `Decimal` has a 96-bit mantissa); the `Option` is the checked
/// conversion's, so a caller never has to trust a cast.
pub fn sats_to_btc(sats: u64) -> Option<Decimal> {
    Decimal::try_from_i128_with_scale(i128::from(sats), 8).ok()
}

const BECH32_CHARSET: &[u8] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const BASE58_CHARSET: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// Whether `address` is safe to put in a URL path as an address: bech32 (`bc1`, `tb1`,
/// `bcrt1`, in one case) or base58 characters only. Checksums are the server's business;
/// this keeps `/`, `?`, `%` and `..` out of the request.
fn is_valid_address(address: &str) -> bool {
    (14..=90).contains(&address.len()) && (is_bech32(address) || address.bytes().all(|b| BASE58_CHARSET.contains(&b)))
}

fn is_bech32(address: &str) -> bool {
    let lower = address.to_ascii_lowercase();
    if address != lower && address != address.to_ascii_uppercase() {
        return false;
    }
    let Some((hrp, data)) = lower.rsplit_once('1') else { return false };
    !hrp.is_empty()
        && hrp.bytes().all(|b| b.is_ascii_lowercase())
        && data.len() >= 6
        && data.bytes().all(|b| BECH32_CHARSET.contains(&b))
}

fn is_valid_txid(txid: &str) -> bool {
    txid.len() == 64 && txid.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A transport failure in words that never quote the URL: ureq's own text for a bad URI
/// or a proxy failure does.
fn transport_error(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Timeout(_) => "timed out".to_string(),
        ureq::Error::Io(e) => format!("connection failed: {e}"),
        ureq::Error::HostNotFound => "host not found".to_string(),
        ureq::Error::ConnectionFailed => "connection failed".to_string(),
        ureq::Error::BodyExceedsLimit(limit) => format!("the answer is larger than {limit} bytes"),
        ureq::Error::Protocol(e) => format!("HTTP protocol error: {e}"),
        ureq::Error::Tls(e) => format!("TLS: {e}"),
        ureq::Error::Rustls(e) => format!("TLS: {e}"),
        ureq::Error::LargeResponseHeader(..) => "response header too large".to_string(),
        ureq::Error::TooManyRedirects | ureq::Error::RedirectFailed => "redirects are not followed".to_string(),
        _ => "request failed".to_string(),
    }
}

/// The loopback Esplora fixture server of the integration tests (see that file), for
/// this module's tests and the chain watcher's.
#[cfg(test)]
#[path = "../../tests/support/esplora_fixtures.rs"]
pub(crate) mod fixture_server;

#[cfg(test)]
mod tests {
    use super::fixture_server::{phase, start};
    use super::*;
    use std::str::FromStr;

    /// The BIP-84 test-vector receive addresses m/84'/0'/0'/0/0..2.
    const ADDRESS_0: &str = "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu";
    const ADDRESS_1: &str = "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g";
    const ADDRESS_2: &str = "bc1qp59yckz4ae5c4efgw2s5wfyvrz0ala7rgvuz8z";
    /// Pays ADDRESS_0 60 000 + 40 000 sat, with change to the payer in between.
    const T0: &str = "d753c6698431aeba44a28e1ceae2108080c1cbf4a15ca732ac37d7ecc3541057";
    /// Pays ADDRESS_1 50 000 sat; replaced by B in phase 2.
    const A: &str = "523af6cda38be88be420bcd4fa0aecdb2620907e667092d79b30c64927088786";
    /// A's replacement, paying ADDRESS_1 the same 50 000 sat.
    const B: &str = "1f25f83595bd44e33ccc09005a159f0991821a1b3ea6ffb4826fd0e912c281cb";

    fn client(url: &str) -> EsploraClient {
        EsploraClient::new(url, Duration::from_secs(10)).expect("client")
    }

    /// T0 pays at outputs 0 and 2, A and B at output 1; the fixtures' one block (870001)
    /// is stamped 1795327000.
    fn payment(txid: &str, sats: u64, block_height: Option<u64>) -> BitcoinPayment {
        let vout = if txid == T0 { 0 } else { 1 };
        let block_time = block_height.map(|_| 1_795_327_000);
        BitcoinPayment { txid: txid.to_string(), vout, sats, block_height, block_time }
    }

    fn targets(server: &fixture_server::FixtureServer) -> Vec<String> {
        server.requests().into_iter().map(|request| request.target).collect()
    }

    #[test]
    fn tip_height_is_read_per_phase() {
        let server = start(phase("phase1"));
        let client = client(&server.url());
        assert_eq!(client.tip_height().expect("tip"), 870_000);
        server.set_phase(phase("phase2"));
        assert_eq!(client.tip_height().expect("tip"), 870_002);
        assert_eq!(targets(&server), ["/blocks/tip/height", "/blocks/tip/height"]);
        assert!(server.requests().iter().all(|request| request.method == "GET"));
    }

    #[test]
    fn payments_sum_only_the_outputs_to_the_address() {
        let server = start(phase("phase1"));
        let client = client(&format!("{}/", server.url()));
        // T0 has two outputs to ADDRESS_0 (60 000 + 40 000) and change elsewhere.
        let payments = client.payments_to(ADDRESS_0).expect("payments");
        assert_eq!(payments, [payment(T0, 100_000, None)]);
        assert_eq!(sats_to_btc(payments[0].sats), Some(Decimal::from_str("0.001").expect("decimal")));
        assert_eq!(client.payments_to(ADDRESS_1).expect("payments"), [payment(A, 50_000, None)]);
        assert!(client.payments_to(ADDRESS_2).expect("payments").is_empty());
        assert_eq!(targets(&server)[0], format!("/address/{ADDRESS_0}/txs"));
    }

    #[test]
    fn an_unconfirmed_payment_becomes_confirmed() {
        let server = start(phase("phase1"));
        let client = client(&server.url());
        assert_eq!(client.payments_to(ADDRESS_0).expect("payments"), [payment(T0, 100_000, None)]);
        assert_eq!(client.transaction_status(T0).expect("status"), TransactionStatus::Unconfirmed);

        server.set_phase(phase("phase2"));
        assert_eq!(client.payments_to(ADDRESS_0).expect("payments"), [payment(T0, 100_000, Some(870_001))]);
        let before = server.requests().len();
        assert_eq!(
            client.transaction_status(T0).expect("status"),
            TransactionStatus::Confirmed { block_height: 870_001 }
        );
        // A confirmed status needs no second request.
        assert_eq!(targets(&server)[before..], [format!("/tx/{T0}/status")]);
    }

    #[test]
    fn a_replaced_transaction_is_missing() {
        let server = start(phase("phase1"));
        let client = client(&server.url());
        assert_eq!(client.transaction_status(A).expect("status"), TransactionStatus::Unconfirmed);

        // electrs: the status of an unknown txid is {"confirmed":false}; /tx/:txid is a 404.
        server.set_phase(phase("phase2"));
        assert_eq!(client.payments_to(ADDRESS_1).expect("payments"), [payment(B, 50_000, None)]);
        let before = server.requests().len();
        assert_eq!(client.transaction_status(A).expect("status"), TransactionStatus::Missing);
        assert_eq!(targets(&server)[before..], [format!("/tx/{A}/status"), format!("/tx/{A}")]);
        assert_eq!(client.transaction_status(B).expect("status"), TransactionStatus::Unconfirmed);

        // mempool.space's backend: the status itself is a 404.
        server.set_phase(phase("phase2-mempool-backend"));
        let before = server.requests().len();
        assert_eq!(client.transaction_status(A).expect("status"), TransactionStatus::Missing);
        assert_eq!(targets(&server)[before..], [format!("/tx/{A}/status")]);
    }

    #[test]
    fn a_404_that_is_not_about_the_transaction_is_an_error() {
        let server = start(phase("errors"));
        let error = client(&server.url()).transaction_status(A).expect_err("an nginx 404 page");
        assert!(error.message().contains("HTTP 404"), "{error}");
        assert!(error.message().contains("nginx"), "{error}");
    }

    #[test]
    fn invalid_addresses_and_txids_are_refused_before_any_request() {
        let server = start(phase("phase1"));
        let client = client(&server.url());
        let long = "bc1q".to_string() + &"q".repeat(90);
        for address in [
            "",
            "bc1q",
            "../../blocks/tip/height",
            "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu/../x",
            "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fy?",
            "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fy%2F",
            "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyU",
            "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN0",
            "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN l",
            &long,
        ] {
            let error = client.payments_to(address).expect_err(address);
            assert!(error.message().contains("not a Bitcoin address"), "{error}");
        }
        for txid in [
            "",
            &T0[..63],
            &format!("{T0}0"),
            &format!("{}g", &T0[..63]),
            &format!("{}/", &T0[..63]),
            "../../../../../../../../../../../../../../../../../../../../../..",
        ] {
            let error = client.transaction_status(txid).expect_err(txid);
            assert!(error.message().contains("not a transaction id"), "{error}");
        }
        assert!(server.requests().is_empty());
    }

    #[test]
    fn every_bitcoin_address_form_is_accepted() {
        for address in [
            ADDRESS_0,
            "BC1QCR8TE4KR609GCAWUTMRZA0J4XV80JY8Z306FYU",
            "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2",
            "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy",
            "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr",
            "tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx",
            "bcrt1qs758ursh4q9z627kt3pp5yysm78ddny6txaqgw",
            "mipcBbFg9gMiCh81Kj8tqqdgoZub1ZJRfn",
        ] {
            assert!(is_valid_address(address), "{address}");
        }
    }

    #[test]
    fn an_http_500_is_an_error_naming_the_status() {
        let server = start(phase("errors"));
        let error = client(&server.url()).tip_height().expect_err("500");
        assert!(error.message().contains("HTTP 500"), "{error}");
        assert!(error.message().contains("GET /blocks/tip/height"), "{error}");
    }

    #[test]
    fn malformed_answers_are_errors() {
        let server = start(phase("errors"));
        let client = client(&server.url());
        // Truncated JSON, an object instead of an array, a negative amount.
        for address in [ADDRESS_0, ADDRESS_1, ADDRESS_2] {
            let error = client.payments_to(address).expect_err(address);
            assert!(error.message().contains("unexpected answer"), "{error}");
        }
        let error = client.transaction_status(T0).expect_err("truncated status");
        assert!(error.message().contains("unexpected answer"), "{error}");
    }

    #[test]
    fn a_confirmed_status_without_height_is_an_error() {
        let status = StatusJson { confirmed: true, block_height: None, block_time: None };
        assert!(confirmed(&status).is_err());
    }

    #[test]
    fn a_transaction_in_both_halves_of_the_history_is_one_confirmed_payment() {
        let tx = |status: &str| {
            format!(
                r#"{{"txid":"{T0}","version":2,"locktime":0,"vin":[],"vout":[
                    {{"scriptpubkey_type":"op_return","value":0}},
                    {{"scriptpubkey_address":"{ADDRESS_0}","value":100000}}],
                   "size":1,"weight":4,"fee":1,"status":{status}}}"#
            )
        };
        let body = format!(
            "[{},{}]",
            tx(r#"{"confirmed":false}"#),
            tx(r#"{"confirmed":true,"block_height":870001,"block_hash":"00","block_time":1}"#)
        );
        let transactions: Vec<TransactionJson> = serde_json::from_str(&body).expect("json");
        let merged = BitcoinPayment {
            txid: T0.to_string(),
            vout: 1,
            sats: 100_000,
            block_height: Some(870_001),
            block_time: Some(1),
        };
        assert_eq!(payments_in(transactions, ADDRESS_0).expect("payments"), [merged]);
    }

    #[test]
    fn answers_over_the_body_limit_are_refused() {
        let server = start(phase("phase1"));
        let mut client = client(&server.url());
        client.body_limit = 256;
        let error = client.payments_to(ADDRESS_0).expect_err("too large");
        assert!(error.message().contains("larger than 256 bytes"), "{error}");
        assert_eq!(client.tip_height().expect("small answer"), 870_000);
    }

    #[test]
    fn urls_secrets_never_show() {
        let secrets = ["user", "secret", "KEY123", "QTOKEN"];
        let shows_no_secret = |text: &str| secrets.iter().all(|secret| !text.contains(secret));

        let hosted = client("https://user:secret@esplora.example:8443/api/KEY123?token=QTOKEN");
        let debug = format!("{hosted:?}");
        assert!(debug.contains("https://esplora.example:8443"), "{debug}");
        assert!(shows_no_secret(&debug), "{debug}");

        let error = EsploraClient::new("ftp://user:secret@esplora.example/KEY123", Duration::from_secs(1))
            .expect_err("not http");
        assert!(shows_no_secret(&error.to_string()), "{error}");
        assert!(shows_no_secret(&format!("{error:?}")), "{error:?}");

        // A server that echoes the request in its 404 page, and one that is down.
        let server = start(phase("phase1"));
        let port = server.url().rsplit(':').next().expect("port").to_string();
        let keyed = client(&format!("http://user:secret@127.0.0.1:{port}/api/KEY123?token=QTOKEN"));
        let error = keyed.tip_height().expect_err("no fixture under /api/KEY123");
        assert!(error.message().starts_with(&format!("Esplora at http://127.0.0.1:{port}: ")), "{error}");
        assert!(shows_no_secret(&error.to_string()), "{error}");
        assert!(shows_no_secret(&format!("{error:?}")), "{error:?}");
        let echoed = keyed.error("GET /blocks/tip/height", "Cannot GET /api/KEY123/blocks/tip/height?token=QTOKEN");
        assert!(shows_no_secret(&echoed.to_string()), "{echoed}");

        let requests = server.requests();
        assert_eq!(requests[0].target, "/api/KEY123/blocks/tip/height?token=QTOKEN");
        // base64("user:secret")
        assert_eq!(requests[0].header("authorization"), Some("Basic dXNlcjpzZWNyZXQ="));

        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("address").port();
        drop(closed);
        let down = client(&format!("http://user:secret@127.0.0.1:{port}/api/KEY123?token=QTOKEN"));
        let error = down.tip_height().expect_err("nothing listens");
        assert!(shows_no_secret(&error.to_string()), "{error}");
    }

    #[test]
    fn a_base_url_with_a_path_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let height = dir.path().join("api").join("v1").join("blocks").join("tip");
        std::fs::create_dir_all(&height).expect("dirs");
        std::fs::write(height.join("height.txt"), "870000\n").expect("write");
        let server = start(dir.path().to_path_buf());
        for base in [format!("{}/api/v1", server.url()), format!("{}/api/v1/", server.url())] {
            assert_eq!(client(&base).tip_height().expect("tip"), 870_000);
        }
    }

    #[test]
    fn bad_base_urls_are_refused() {
        for url in ["", "not a url", "ftp://example.com/", "unix:/run/esplora.sock", "http://"] {
            assert!(EsploraClient::new(url, Duration::from_secs(1)).is_err(), "{url}");
        }
    }

    #[test]
    fn sats_convert_to_btc_exactly() {
        let btc = |text: &str| Some(Decimal::from_str(text).expect("decimal"));
        assert_eq!(sats_to_btc(100_000), btc("0.001"));
        assert_eq!(sats_to_btc(100_000).map(|d| d.to_string()).as_deref(), Some("0.00100000"));
        assert_eq!(sats_to_btc(0), btc("0"));
        assert_eq!(sats_to_btc(1), btc("0.00000001"));
        assert_eq!(sats_to_btc(2_100_000_000_000_000), btc("21000000"));
        assert_eq!(sats_to_btc(u64::MAX), btc("184467440737.09551615"));
    }

    #[test]
    fn a_secret_cut_by_the_excerpt_is_still_blanked_whole() {
        let client = client("https://esplora.example/api/SECRETKEY1234567");
        // The answer quotes the key where the excerpt ends: cut first, its start would show.
        let body = format!("{} /api/SECRETKEY1234567 not found", "x".repeat(EXCERPT_CHARS - 10));
        let message = client.status_error("GET /tx/:txid/status", 404, body.as_bytes()).to_string();
        assert!(!message.contains("SECR"), "{message}");
        assert!(message.contains("answered HTTP 404: xxx"), "{message}");
    }

    /// Transaction `n` (its id is `n` in hex) paying `address` `sats`, in block
    /// 869,000 − n when `confirmed`, else in the mempool.
    fn history_entry(address: &str, n: u64, sats: u64, confirmed: bool) -> serde_json::Value {
        let status = match confirmed {
            true => {
                serde_json::json!({"confirmed": true, "block_height": 869_000 - n, "block_time": 1_795_000_000 - n})
            }
            false => serde_json::json!({"confirmed": false}),
        };
        serde_json::json!({
            "txid": format!("{n:064x}"),
            "vout": [{"scriptpubkey_address": address, "value": sats}],
            "status": status,
        })
    }

    /// A phase directory whose `address` history is `pages`: the first page, then each
    /// further one after the last transaction of the page before.
    fn history_pages(address: &str, pages: &[Vec<serde_json::Value>]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let history = dir.path().join(format!("address/{address}"));
        std::fs::create_dir_all(history.join("txs/chain")).expect("dirs");
        let mut name = "txs.json".to_string();
        for page in pages {
            std::fs::write(history.join(&name), serde_json::json!(page).to_string()).expect("write");
            let last = page.last().and_then(|entry| entry["txid"].as_str()).unwrap_or_default();
            name = format!("txs/chain/{last}.json");
        }
        dir
    }

    #[test]
    fn older_pages_are_read_while_a_page_is_full_so_dust_cannot_hide_a_payment() {
        // 25 confirmed dust transactions fill ADDRESS_2's first page; the payment is on the
        // page after the last of them, and a second full page leads to a third, empty one.
        let page = |from: u64| (from..from + 25).map(|n| history_entry(ADDRESS_2, n, 546, true)).collect::<Vec<_>>();
        let mut second = page(26);
        second[3] = history_entry(ADDRESS_2, 29, 50_000, true); // the payment, among more dust
        let dir = history_pages(ADDRESS_2, &[page(1), second, Vec::new()]);
        let server = start(dir.path().to_path_buf());
        let payments = client(&server.url()).payments_to(ADDRESS_2).expect("payments");
        assert_eq!(payments.len(), 50);
        assert!(payments.iter().any(|p| p.txid == format!("{:064x}", 29) && p.sats == 50_000), "{payments:?}");
        assert_eq!(
            targets(&server),
            [
                format!("/address/{ADDRESS_2}/txs"),
                format!("/address/{ADDRESS_2}/txs/chain/{:064x}", 25),
                format!("/address/{ADDRESS_2}/txs/chain/{:064x}", 50),
            ]
        );
    }

    #[test]
    fn a_first_page_of_25_counting_mempool_ones_leads_to_the_next() {
        // mempool.space's fork: 25 in all, the mempool's first (here 5), then confirmed.
        let first: Vec<_> = (1..=25).map(|n| history_entry(ADDRESS_1, n, 546 + n, n > 5)).collect();
        let dir = history_pages(ADDRESS_1, &[first, vec![history_entry(ADDRESS_1, 26, 600, true)]]);
        let server = start(dir.path().to_path_buf());
        let payments = client(&server.url()).payments_to(ADDRESS_1).expect("payments");
        assert_eq!(payments.len(), 26, "{payments:?}");
        assert_eq!(targets(&server).len(), 2, "the page of one was the last");
    }
}
