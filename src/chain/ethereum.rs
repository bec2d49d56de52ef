//! A synchronous Ethereum JSON-RPC client: what the chain watcher needs to see payments
//! to invoice addresses, in native ETH ([`EthereumClient::block`]) and in ERC-20 tokens
//! ([`EthereumClient::token_transfers`]), and to follow a payment's transaction until it
//! is deep enough ([`EthereumClient::receipt`], [`EthereumClient::transaction_known`]).
//!
//! Amounts stay integers (wei, token base units) as `u128` parsed from the node's hex
//! strings, and become decimals only through [`units_to_decimal`], exactly: no float is
//! ever involved. A value that does not fit a `u128` is refused, not truncated.
//!
//! Hosted RPC URLs carry API keys in their path, query or userinfo, so nothing this
//! module prints (errors, `Debug`) shows more of the URL than `scheme://host:port`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::{Endpoint, EndpointError};

/// keccak256("Transfer(address,address,uint256)"): topic 0 of every ERC-20 `Transfer` log.
pub const TRANSFER_TOPIC: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// The most a response body may hold. A block with full transactions is a few hundred
/// KiB on mainnet; anything near this cap is a misbehaving endpoint, not data.
const MAX_BODY_BYTES: u64 = 16 * 1024 * 1024;

/// The longest node-supplied error text kept in an [`RpcError`], so a node echoing a
/// huge payload back cannot flood the logs.
const MAX_MESSAGE_CHARS: usize = 512;

/// An endpoint failure: transport, HTTP status, JSON-RPC error object or a response that
/// does not parse. Its `Display` never shows the URL's path, query or userinfo (hosted RPC
/// URLs carry API keys), only `scheme://host:port`, plus the JSON-RPC method and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    endpoint: String,
    method: String,
    code: Option<i64>,
    message: String,
}

impl RpcError {
    /// What went wrong: the node's JSON-RPC error message or a transport/parse failure.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON-RPC method of the failed call; empty when the client could not be built.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The JSON-RPC error code when the node answered with an error object (for example
    /// `-32005` from providers that refuse too wide an `eth_getLogs` range).
    pub fn code(&self) -> Option<i64> {
        self.code
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ethereum rpc {}", self.endpoint)?;
        if !self.method.is_empty() {
            write!(f, " {}", self.method)?;
        }
        if let Some(code) = self.code {
            write!(f, " (code {code})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for RpcError {}

/// A native ETH transfer in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthTransfer {
    /// The transaction hash: `0x` and 64 lowercase hex digits.
    pub tx_hash: String,
    /// The recipient, a lowercase `0x` address.
    pub to: String,
    /// The value sent, in wei.
    pub wei: u128,
}

/// A block with its native transfers: the transactions that have a `to` and a value
/// above zero (contract creations and zero-value calls cannot pay an invoice in ETH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthBlock {
    /// The block height.
    pub number: u64,
    /// The block hash, lowercase `0x` hex: compared on the next poll to notice a reorg.
    pub hash: String,
    /// The native transfers, in block order.
    pub transfers: Vec<EthTransfer>,
}

/// An ERC-20 `Transfer(address,address,uint256)` log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenTransfer {
    /// The hash of the transaction that emitted the log, lowercase.
    pub tx_hash: String,
    /// The log's index in its block: with `block_hash`, what makes a log unique (one
    /// transaction may transfer to the same address several times).
    pub log_index: u64,
    /// The token contract, a lowercase `0x` address.
    pub contract: String,
    /// The recipient, a lowercase `0x` address.
    pub to: String,
    /// The amount in the token's base units (6 decimals for USDT: 1 USDT = 1_000_000).
    pub units: u128,
    /// The height of the block holding the log.
    pub block_number: u64,
    /// The hash of the block holding the log, lowercase.
    pub block_hash: String,
}

/// Where a mined transaction is, from its receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The height of the block that holds the transaction.
    pub block_number: u64,
    /// The hash of that block, lowercase.
    pub block_hash: String,
    /// `status == 0x1`. A reverted transaction is mined but moved nothing: for a token
    /// payment its `Transfer` log never existed. A receipt without `status` is an
    /// incomplete answer, an error: every block since Byzantium (2017) has one, and
    /// reading its absence as a revert failed a paid order for good.
    pub succeeded: bool,
}

/// A blocking JSON-RPC client of one Ethereum node (HTTP or HTTPS).
///
/// Each call is one HTTP request with the timeout given to [`EthereumClient::new`]; there
/// are no retries here, the watcher polls again on its own schedule.
pub struct EthereumClient {
    agent: ureq::Agent,
    /// The node's URL (userinfo sent as a `Basic` header); errors and `Debug` show only
    /// its origin, and every error message is scrubbed of its secrets.
    endpoint: Endpoint,
    next_id: AtomicU64,
}

impl fmt::Debug for EthereumClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EthereumClient").field("endpoint", &self.endpoint.origin()).finish_non_exhaustive()
    }
}

impl EthereumClient {
    /// A client of the node at `rpc_url` (`http://` or `https://`; credentials may be in
    /// the path, query or userinfo), each request limited to `timeout` in total.
    ///
    /// Redirects are not followed: a redirected JSON-RPC POST is a misconfiguration, and
    /// following it could hand the API key in the path to another host.
    pub fn new(rpc_url: &str, timeout: Duration) -> Result<EthereumClient, RpcError> {
        let invalid = |endpoint: &str, message: &str| RpcError {
            endpoint: endpoint.to_string(),
            method: String::new(),
            code: None,
            message: message.to_string(),
        };
        let endpoint = Endpoint::parse(rpc_url).map_err(|e| match e {
            EndpointError::Invalid(e) => invalid("(invalid url)", &format!("invalid RPC URL: {e}")),
            EndpointError::Scheme { origin, .. } => invalid(&origin, "the RPC URL must be http:// or https://"),
            EndpointError::NoHost { origin } => invalid(&origin, "the RPC URL has no host"),
        })?;
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(timeout))
            .user_agent("coinorder-chain")
            .build();
        Ok(EthereumClient { agent: crate::http_client::agent(config), endpoint, next_id: AtomicU64::new(1) })
    }

    /// The latest block height (`eth_blockNumber`).
    pub fn block_number(&self) -> Result<u64, RpcError> {
        const METHOD: &str = "eth_blockNumber";
        let result = self.call(METHOD, json!([]))?;
        parse_u64(&result).map_err(|e| self.malformed(METHOD, &format!("block number: {e}")))
    }

    /// The block at height `number` with its native transfers
    /// (`eth_getBlockByNumber(number, true)`); `None` when the node has no such block yet.
    pub fn block(&self, number: u64) -> Result<Option<EthBlock>, RpcError> {
        const METHOD: &str = "eth_getBlockByNumber";
        let result = self.call(METHOD, json!([format!("{number:#x}"), true]))?;
        if result.is_null() {
            return Ok(None);
        }
        let block = parse_block(&result).map_err(|e| self.malformed(METHOD, &e))?;
        if block.number != number {
            return Err(self.malformed(METHOD, &format!("asked for block {number}, got {}", block.number)));
        }
        Ok(Some(block))
    }

    /// When the block at height `number` was made, in Unix seconds
    /// (`eth_getBlockByNumber(number, false)`: the header, without its transactions);
    /// `None` when the node has no such block.
    pub fn block_timestamp(&self, number: u64) -> Result<Option<u64>, RpcError> {
        const METHOD: &str = "eth_getBlockByNumber";
        let result = self.call(METHOD, json!([format!("{number:#x}"), false]))?;
        if result.is_null() {
            return Ok(None);
        }
        let timestamp = field(&result, "timestamp").and_then(parse_u64);
        timestamp.map(Some).map_err(|e| self.malformed(METHOD, &format!("block timestamp: {e}")))
    }

    /// The ERC-20 `Transfer` logs of blocks `from_block..=to_block` emitted by one of
    /// `contracts` and paying one of `recipients` (`eth_getLogs` with topics
    /// `[TRANSFER_TOPIC, null, [recipients]]`), in the node's order. Logs flagged
    /// `removed` (reorged out) are skipped.
    ///
    /// The caller keeps the range small (tens to a few hundred blocks, as the watcher
    /// advances from its last scanned height): hosted providers refuse wide ranges or
    /// results over a few thousand logs, with an error whose [`RpcError::code`] is often
    /// `-32005`, and this method does not split the range itself.
    ///
    /// No request is made and nothing is returned when `recipients` or `contracts` is
    /// empty: an empty `address` list would match a `Transfer` of *any* contract,
    /// including a worthless token anyone can deploy.
    pub fn token_transfers(
        &self,
        from_block: u64,
        to_block: u64,
        contracts: &[String],
        recipients: &[String],
    ) -> Result<Vec<TokenTransfer>, RpcError> {
        const METHOD: &str = "eth_getLogs";
        if recipients.is_empty() || contracts.is_empty() {
            return Ok(Vec::new());
        }
        if from_block > to_block {
            return Err(self.invalid(METHOD, &format!("fromBlock {from_block} is after toBlock {to_block}")));
        }
        let contracts = normalized_addresses(contracts).map_err(|e| self.invalid(METHOD, &e))?;
        let recipients = normalized_addresses(recipients).map_err(|e| self.invalid(METHOD, &e))?;
        let topics: Vec<String> = recipients.iter().map(|address| address_topic(address)).collect();
        let filter = json!({
            "fromBlock": format!("{from_block:#x}"),
            "toBlock": format!("{to_block:#x}"),
            "address": contracts,
            "topics": [TRANSFER_TOPIC, null, topics],
        });
        let result = self.call(METHOD, json!([filter]))?;
        let logs = result.as_array().ok_or_else(|| self.malformed(METHOD, "the result is not an array"))?;
        let mut transfers = Vec::new();
        for log in logs {
            let Some(transfer) = parse_transfer_log(log).map_err(|e| self.malformed(METHOD, &e))? else {
                continue;
            };
            // The node applied the filter already; checking again means a buggy or
            // hostile endpoint cannot slip in a log of another contract or recipient.
            if contracts.contains(&transfer.contract)
                && recipients.contains(&transfer.to)
                && (from_block..=to_block).contains(&transfer.block_number)
            {
                transfers.push(transfer);
            }
        }
        Ok(transfers)
    }

    /// The decimals `contract` declares (ERC-20's optional `decimals()`, by `eth_call` at
    /// the latest block): the power of ten its `Transfer` values are in. `None` when the
    /// contract has no such function (an empty result, or the call reverted) or answers
    /// a value that is not a `uint8`; an endpoint that failed is an `Err`.
    pub fn token_decimals(&self, contract: &str) -> Result<Option<u8>, RpcError> {
        const METHOD: &str = "eth_call";
        /// The selector of `decimals()`: the first 4 bytes of its signature's Keccak-256.
        const DECIMALS_SELECTOR: &str = "0x313ce567";
        let contract = normalized_address(contract).map_err(|e| self.invalid(METHOD, &e))?;
        let result = match self.call(METHOD, json!([{"to": contract, "data": DECIMALS_SELECTOR}, "latest"])) {
            Ok(result) => result,
            // Nodes report a revert as an error object (code 3 with geth and anvil, -32000
            // and "execution reverted" or "revert" with others): the contract's answer,
            // not the endpoint failing. Any other error may be the endpoint's (a rate
            // limit, a timeout) and is one, so that the pass is tried again.
            Err(error)
                if error.code == Some(3)
                    || (error.code.is_some() && error.message.to_ascii_lowercase().contains("revert")) =>
            {
                return Ok(None)
            }
            Err(error) => return Err(error),
        };
        let text = result.as_str().ok_or_else(|| self.malformed(METHOD, "the result is not a hex string"))?;
        if text == "0x" {
            return Ok(None);
        }
        match parse_hex_u128(text) {
            Ok(value) if text.len() == 66 => Ok(u8::try_from(value).ok()),
            Ok(_) => Ok(None),
            Err(e) => Err(self.malformed(METHOD, &e)),
        }
    }

    /// The receipt of `tx_hash` (`eth_getTransactionReceipt`): `None` while the
    /// transaction is not mined, and again once it is dropped or reorged out.
    pub fn receipt(&self, tx_hash: &str) -> Result<Option<Receipt>, RpcError> {
        const METHOD: &str = "eth_getTransactionReceipt";
        let hash = normalized_hash(tx_hash).map_err(|e| self.invalid(METHOD, &e))?;
        let result = self.call(METHOD, json!([hash]))?;
        parse_receipt(&result).map_err(|e| self.malformed(METHOD, &e))
    }

    /// Whether the node still knows `tx_hash`, mined or pending
    /// (`eth_getTransactionByHash` is not null): a payment that is neither known nor has a
    /// receipt was dropped from the mempool or reorged out without being re-included.
    pub fn transaction_known(&self, tx_hash: &str) -> Result<bool, RpcError> {
        const METHOD: &str = "eth_getTransactionByHash";
        let hash = normalized_hash(tx_hash).map_err(|e| self.invalid(METHOD, &e))?;
        Ok(!self.call(METHOD, json!([hash]))?.is_null())
    }

    /// One JSON-RPC call: its `result` (which may be `null`), or the error object, HTTP
    /// status or transport failure as an [`RpcError`].
    fn call(&self, method: &'static str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let mut request = self.agent.post(self.endpoint.url().as_str()).header("content-type", "application/json");
        if let Some(authorization) = self.endpoint.authorization() {
            request = request.header("authorization", authorization);
        }
        let mut response = request.send(body.as_bytes()).map_err(|e| self.error(method, None, &transport(&e)))?;
        let status = response.status().as_u16();
        let bytes =
            response.body_mut().with_config().limit(MAX_BODY_BYTES).read_to_vec().map_err(|e| {
                self.error(method, None, &format!("HTTP {status}, reading the body: {}", transport(&e)))
            })?;
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        // Some providers answer rate limits and bad keys with a 4xx that still carries a
        // JSON-RPC error object: its message says more than the status alone.
        if let Some(error) = parsed.as_ref().and_then(|v| v.get("error")).filter(|e| !e.is_null()) {
            let code = error.get("code").and_then(Value::as_i64);
            let message = match error.get("message").and_then(Value::as_str) {
                Some(message) => message.to_string(),
                None => error.to_string(),
            };
            return Err(self.error(method, code, &message));
        }
        if !(200..300).contains(&status) {
            return Err(self.error(method, None, &format!("HTTP {status}")));
        }
        match parsed {
            Some(Value::Object(mut object)) => match object.remove("result") {
                Some(result) => Ok(result),
                None => Err(self.malformed(method, "the response has neither result nor error")),
            },
            Some(_) => Err(self.malformed(method, "the response is not a JSON object")),
            None => Err(self.malformed(method, "the response is not JSON")),
        }
    }

    fn error(&self, method: &str, code: Option<i64>, message: &str) -> RpcError {
        // Blanked before it is cut: a cut inside a secret would leave its start unblanked.
        let message: String = self.endpoint.scrub(message).chars().take(MAX_MESSAGE_CHARS).collect();
        RpcError { endpoint: self.endpoint.origin().to_string(), method: method.to_string(), code, message }
    }

    fn malformed(&self, method: &str, what: &str) -> RpcError {
        self.error(method, None, &format!("malformed response: {what}"))
    }

    fn invalid(&self, method: &str, what: &str) -> RpcError {
        self.error(method, None, &format!("invalid request: {what}"))
    }
}

/// `units` base units as a decimal amount with `decimals` places, exactly (12_500_000
/// with 6 decimals is `12.500000`, equal to `12.5`). `None` when it does not fit a
/// [`Decimal`]: more than 28 decimals, or `units` above 2^96 - 1 (about 79 billion ETH in
/// wei, far beyond any payment).
pub fn units_to_decimal(units: u128, decimals: u32) -> Option<Decimal> {
    let units = i128::try_from(units).ok()?;
    Decimal::try_from_i128_with_scale(units, decimals).ok()
}

/// A ureq error in words. ureq's `Display` of an invalid URI quotes it, so that one is
/// summarized instead.
fn transport(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Timeout(_) => "timed out".to_string(),
        ureq::Error::Io(e) => format!("connection failed: {e}"),
        ureq::Error::BadUri(_) => "invalid URL".to_string(),
        ureq::Error::BodyExceedsLimit(limit) => format!("the response is larger than {limit} bytes"),
        other => other.to_string(),
    }
}

/// The digits of a `0x` hex string (any case), or why it is not one.
fn hex_digits(text: &str) -> Result<&str, String> {
    let digits = text.strip_prefix("0x").ok_or_else(|| format!("{} is not 0x-prefixed hex", excerpt(text)))?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{} is not 0x-prefixed hex", excerpt(text)));
    }
    Ok(digits)
}

/// A hex quantity (`"0x1bc16d674ec80000"`) or 32-byte word as a `u128`. Leading zeros are
/// accepted (log data is a zero-padded word); a value above `u128::MAX` is refused.
fn parse_hex_u128(text: &str) -> Result<u128, String> {
    let digits = hex_digits(text)?;
    let significant = digits.trim_start_matches('0');
    if significant.len() > 32 {
        return Err(format!("{} does not fit 128 bits", excerpt(text)));
    }
    if significant.is_empty() {
        return Ok(0);
    }
    // Only hex digits reach here (checked above), so from_str_radix's own "+" sign
    // acceptance cannot let "0x+1" through.
    u128::from_str_radix(significant, 16).map_err(|e| format!("{}: {e}", excerpt(text)))
}

/// A JSON value that must be a hex quantity string, as a `u128`.
fn parse_quantity(value: &Value) -> Result<u128, String> {
    match value.as_str() {
        Some(text) => parse_hex_u128(text),
        None => Err(format!("{} is not a hex string", excerpt(&value.to_string()))),
    }
}

fn parse_u64(value: &Value) -> Result<u64, String> {
    let quantity = parse_quantity(value)?;
    u64::try_from(quantity).map_err(|_| format!("{quantity} does not fit 64 bits"))
}

/// Field `name` of `object`, required.
fn field<'a>(object: &'a Value, name: &str) -> Result<&'a Value, String> {
    match object.get(name) {
        Some(value) if !value.is_null() => Ok(value),
        _ => Err(format!("missing {name}")),
    }
}

/// A 20-byte address, lowercase, from a JSON string.
fn parse_address(value: &Value) -> Result<String, String> {
    let text = value.as_str().ok_or_else(|| "an address is not a string".to_string())?;
    normalized_address(text)
}

/// `0x` and 40 hex digits, lowercased.
fn normalized_address(text: &str) -> Result<String, String> {
    let digits = hex_digits(text)?;
    if digits.len() != 40 {
        return Err(format!("{} is not a 20-byte address", excerpt(text)));
    }
    Ok(format!("0x{}", digits.to_ascii_lowercase()))
}

fn normalized_addresses(addresses: &[String]) -> Result<Vec<String>, String> {
    let mut normalized = Vec::with_capacity(addresses.len());
    for address in addresses {
        let address = normalized_address(address.trim())?;
        if !normalized.contains(&address) {
            normalized.push(address);
        }
    }
    Ok(normalized)
}

/// `0x` and 64 hex digits (a transaction or block hash), lowercased.
fn normalized_hash(text: &str) -> Result<String, String> {
    let digits = hex_digits(text)?;
    if digits.len() != 64 {
        return Err(format!("{} is not a 32-byte hash", excerpt(text)));
    }
    Ok(format!("0x{}", digits.to_ascii_lowercase()))
}

fn parse_hash(value: &Value) -> Result<String, String> {
    let text = value.as_str().ok_or_else(|| "a hash is not a string".to_string())?;
    normalized_hash(text)
}

/// A lowercase address as the 32-byte topic an indexed `address` parameter is logged as:
/// 12 zero bytes, then the address.
fn address_topic(address: &str) -> String {
    format!("0x000000000000000000000000{}", address.trim_start_matches("0x"))
}

/// The address an indexed `address` topic holds; refused when its first 12 bytes are not
/// zero (then it is not an address).
fn topic_address(topic: &str) -> Result<String, String> {
    let word = normalized_hash(topic)?;
    let (padding, address) = word.split_at(26);
    if padding != "0x000000000000000000000000" {
        return Err(format!("topic {} is not a padded address", excerpt(topic)));
    }
    Ok(format!("0x{address}"))
}

fn parse_block(block: &Value) -> Result<EthBlock, String> {
    let number = parse_u64(field(block, "number")?)?;
    let hash = parse_hash(field(block, "hash")?)?;
    let transactions =
        field(block, "transactions")?.as_array().ok_or_else(|| "transactions is not an array".to_string())?;
    let mut transfers = Vec::new();
    for transaction in transactions {
        if !transaction.is_object() {
            // Hashes only: the node ignored the full-transactions flag.
            return Err("transactions are not objects".to_string());
        }
        let wei = parse_quantity(field(transaction, "value")?)?;
        let to = match transaction.get("to") {
            Some(to) if !to.is_null() => parse_address(to)?,
            _ => continue, // contract creation
        };
        if wei == 0 {
            continue;
        }
        transfers.push(EthTransfer { tx_hash: parse_hash(field(transaction, "hash")?)?, to, wei });
    }
    Ok(EthBlock { number, hash, transfers })
}

/// One `eth_getLogs` entry as a [`TokenTransfer`]; `None` for a log to skip: flagged
/// `removed`, or not shaped like an ERC-20 `Transfer` (an ERC-721 `Transfer` shares the
/// topic but indexes its token id as a fourth topic and has no data).
fn parse_transfer_log(log: &Value) -> Result<Option<TokenTransfer>, String> {
    if log.get("removed").and_then(Value::as_bool) == Some(true) {
        return Ok(None);
    }
    let topics = field(log, "topics")?.as_array().ok_or_else(|| "topics is not an array".to_string())?;
    let topic = |i: usize| topics.get(i).and_then(Value::as_str).ok_or_else(|| format!("topic {i} is not a string"));
    if topics.len() != 3 || !topic(0)?.eq_ignore_ascii_case(TRANSFER_TOPIC) {
        return Ok(None);
    }
    let data = field(log, "data")?.as_str().ok_or_else(|| "data is not a string".to_string())?;
    if hex_digits(data)?.len() != 64 {
        return Err(format!("Transfer data {} is not one 32-byte word", excerpt(data)));
    }
    Ok(Some(TokenTransfer {
        tx_hash: parse_hash(field(log, "transactionHash")?)?,
        log_index: parse_u64(field(log, "logIndex")?)?,
        contract: parse_address(field(log, "address")?)?,
        to: topic_address(topic(2)?)?,
        units: parse_hex_u128(data)?,
        block_number: parse_u64(field(log, "blockNumber")?)?,
        block_hash: parse_hash(field(log, "blockHash")?)?,
    }))
}

fn parse_receipt(receipt: &Value) -> Result<Option<Receipt>, String> {
    if receipt.is_null() {
        return Ok(None);
    }
    // Some nodes return a receipt for a pending transaction with a null block.
    let (Some(number), Some(hash)) =
        (receipt.get("blockNumber").filter(|v| !v.is_null()), receipt.get("blockHash").filter(|v| !v.is_null()))
    else {
        return Ok(None);
    };
    let succeeded = match receipt.get("status") {
        Some(status) if !status.is_null() => parse_quantity(status)? == 1,
        _ => return Err("a receipt without status".to_string()),
    };
    Ok(Some(Receipt { block_number: parse_u64(number)?, block_hash: parse_hash(hash)?, succeeded }))
}

/// The start of a node-supplied string, for error messages.
fn excerpt(text: &str) -> String {
    const MAX: usize = 80;
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        format!("{:?}...", text.chars().take(MAX).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn hex_quantities() {
        assert_eq!(parse_hex_u128("0x0"), Ok(0));
        assert_eq!(parse_hex_u128("0x00"), Ok(0));
        assert_eq!(parse_hex_u128("0x1bc16d674ec80000"), Ok(2_000_000_000_000_000_000));
        assert_eq!(parse_hex_u128("0xDEADbeef"), Ok(0xdead_beef));
        assert_eq!(parse_hex_u128(&format!("0x{}", "f".repeat(32))), Ok(u128::MAX));
        // A zero-padded 32-byte word whose value fits.
        assert_eq!(parse_hex_u128(&format!("0x{}bebc20", "0".repeat(58))), Ok(12_500_000));
        assert_eq!(parse_u64(&json!("0x10")), Ok(16));
    }

    #[test]
    fn malformed_and_oversized_quantities_are_refused() {
        for bad in ["", "0x", "1234", "0X12", "0x+1", "0x-1", "0xg", "0x12 ", " 0x12", "0x1_0"] {
            assert!(parse_hex_u128(bad).is_err(), "{bad:?} accepted");
        }
        // 2^128: one past u128::MAX.
        assert!(parse_hex_u128(&format!("0x1{}", "0".repeat(32))).is_err());
        assert!(parse_hex_u128(&format!("0x{}", "f".repeat(64))).is_err());
        assert!(parse_quantity(&json!(16)).is_err(), "numbers are not quantities");
        assert!(parse_quantity(&Value::Null).is_err());
        assert!(parse_u64(&json!("0x10000000000000000")).is_err(), "2^64 is not a u64");
    }

    #[test]
    fn addresses_hashes_and_topics() {
        let mixed = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
        let lower = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
        assert_eq!(normalized_address(mixed).as_deref(), Ok(lower));
        assert!(normalized_address("0x5fbdb2315678afecb367f032d93f642f64180aa").is_err());
        assert!(normalized_address("5fbdb2315678afecb367f032d93f642f64180aa3").is_err());
        assert!(normalized_address("0x5fbdb2315678afecb367f032d93f642f64180aaz").is_err());
        assert!(normalized_hash(&format!("0x{}", "a".repeat(63))).is_err());
        assert_eq!(normalized_hash(&format!("0x{}", "A".repeat(64))), Ok(format!("0x{}", "a".repeat(64))));

        let topic = address_topic(lower);
        assert_eq!(topic, "0x0000000000000000000000005fbdb2315678afecb367f032d93f642f64180aa3");
        assert_eq!(topic.len(), 66);
        assert_eq!(topic_address(&topic).as_deref(), Ok(lower));
        assert!(topic_address(&format!("0x01{}", &topic[4..])).is_err(), "dirty padding is not an address");
        assert_eq!(normalized_addresses(&[mixed.to_string(), lower.to_string()]), Ok(vec![lower.to_string()]));
    }

    fn sample_log() -> Value {
        json!({
            "address": "0x5FBDB2315678AFECB367F032D93F642F64180AA3",
            "topics": [
                "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
                "0x000000000000000000000000f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
                "0x000000000000000000000000ABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCD"
            ],
            "data": "0x0000000000000000000000000000000000000000000000000000000000bebc20",
            "blockHash": "0xd5e6e7d67611343384b94e75bedce0475c3f8a35b52f200e8439516ebfb60ef4",
            "blockNumber": "0x6",
            "blockTimestamp": "0x6b055f28",
            "transactionHash": "0xba1c8608c29c871561ba04a0f4bf75ec0fd77d80aff81ccc54232c9d76b6d6c6",
            "transactionIndex": "0x0",
            "logIndex": "0x2",
            "removed": false
        })
    }

    #[test]
    fn transfer_log_parses() {
        let transfer = parse_transfer_log(&sample_log()).expect("parses").expect("a transfer");
        assert_eq!(
            transfer,
            TokenTransfer {
                tx_hash: "0xba1c8608c29c871561ba04a0f4bf75ec0fd77d80aff81ccc54232c9d76b6d6c6".into(),
                log_index: 2,
                contract: "0x5fbdb2315678afecb367f032d93f642f64180aa3".into(),
                to: "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd".into(),
                units: 12_500_000,
                block_number: 6,
                block_hash: "0xd5e6e7d67611343384b94e75bedce0475c3f8a35b52f200e8439516ebfb60ef4".into(),
            }
        );
    }

    #[test]
    fn odd_logs_are_skipped_or_refused() {
        let mut removed = sample_log();
        removed["removed"] = json!(true);
        assert_eq!(parse_transfer_log(&removed), Ok(None));

        // ERC-721: same topic 0, token id as a fourth topic, empty data.
        let mut nft = sample_log();
        nft["topics"].as_array_mut().expect("array").push(json!(format!("0x{}", "0".repeat(63) + "7")));
        nft["data"] = json!("0x");
        assert_eq!(parse_transfer_log(&nft), Ok(None));

        let mut huge = sample_log();
        huge["data"] = json!(format!("0x{}", "f".repeat(64)));
        assert!(parse_transfer_log(&huge).is_err(), "a value over u128 is refused, not truncated");

        let mut short = sample_log();
        short["data"] = json!("0xbebc20");
        assert!(parse_transfer_log(&short).is_err());

        let mut no_hash = sample_log();
        no_hash.as_object_mut().expect("object").remove("transactionHash");
        assert!(parse_transfer_log(&no_hash).is_err());
    }

    #[test]
    fn blocks_keep_valued_calls_with_a_recipient() {
        let block = json!({
            "number": "0x2a",
            "hash": "0xC359214726D2149BE45B0E07202FCC2EA3D2195E2EB34ACF9D011EB9C95FB39F",
            "transactions": [
                {"hash": format!("0x{}", "1".repeat(64)), "to": "0x1111111111111111111111111111111111111111",
                 "value": "0xde0b6b3a7640000"},
                {"hash": format!("0x{}", "2".repeat(64)), "to": null, "value": "0x5"},
                {"hash": format!("0x{}", "3".repeat(64)), "to": "0x2222222222222222222222222222222222222222",
                 "value": "0x0"}
            ]
        });
        let parsed = parse_block(&block).expect("parses");
        assert_eq!(parsed.number, 42);
        assert_eq!(parsed.hash, "0xc359214726d2149be45b0e07202fcc2ea3d2195e2eb34acf9d011eb9c95fb39f");
        assert_eq!(
            parsed.transfers,
            vec![EthTransfer {
                tx_hash: format!("0x{}", "1".repeat(64)),
                to: "0x1111111111111111111111111111111111111111".into(),
                wei: 1_000_000_000_000_000_000,
            }]
        );
        let hashes_only = json!({"number": "0x1", "hash": format!("0x{}", "a".repeat(64)),
                                 "transactions": [format!("0x{}", "1".repeat(64))]});
        assert!(parse_block(&hashes_only).is_err());
    }

    #[test]
    fn receipts() {
        assert_eq!(parse_receipt(&Value::Null), Ok(None));
        let hash = format!("0x{}", "b".repeat(64));
        let mined = json!({"blockNumber": "0x5", "blockHash": hash, "status": "0x1"});
        assert_eq!(
            parse_receipt(&mined),
            Ok(Some(Receipt { block_number: 5, block_hash: hash.clone(), succeeded: true }))
        );
        let reverted = json!({"blockNumber": "0x5", "blockHash": hash, "status": "0x0"});
        assert_eq!(parse_receipt(&reverted).expect("parses").map(|r| r.succeeded), Some(false));
        let pending = json!({"blockNumber": null, "blockHash": null, "status": "0x1"});
        assert_eq!(parse_receipt(&pending), Ok(None));
        // A mined receipt without status is an incomplete answer, never a revert.
        for incomplete in [
            json!({"blockNumber": "0x5", "blockHash": hash}),
            json!({"blockNumber": "0x5", "blockHash": hash, "status": null}),
        ] {
            assert!(parse_receipt(&incomplete).is_err(), "{incomplete}");
        }
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(units_to_decimal(12_500_000, 6), Some(Decimal::new(125, 1)));
        assert_eq!(units_to_decimal(12_500_000, 6).map(|d| d.to_string()).as_deref(), Some("12.500000"));
        assert_eq!(units_to_decimal(1, 18).map(|d| d.to_string()).as_deref(), Some("0.000000000000000001"));
        assert_eq!(units_to_decimal(0, 0), Some(Decimal::ZERO));
        let max_mantissa = (1u128 << 96) - 1;
        assert!(units_to_decimal(max_mantissa, 18).is_some());
        assert_eq!(units_to_decimal(max_mantissa + 1, 18), None);
        assert_eq!(units_to_decimal(u128::MAX, 0), None);
        assert_eq!(units_to_decimal(1, 29), None);
    }

    #[test]
    fn urls_never_leak_into_errors_or_debug() {
        let client = EthereumClient::new(
            "https://alice:hunter2@rpc.example.com/v3/0123456789abcdef?key=QUERYSECRET",
            Duration::from_secs(1),
        )
        .expect("valid");
        assert_eq!(client.endpoint.origin(), "https://rpc.example.com:443");
        assert_eq!(client.endpoint.url().as_str(), "https://rpc.example.com/v3/0123456789abcdef?key=QUERYSECRET");
        assert!(client.endpoint.authorization().is_some());
        let debug = format!("{client:?}");
        assert!(!debug.contains("0123456789abcdef") && !debug.contains("hunter2"), "{debug}");
        let error = client.error(
            "eth_blockNumber",
            Some(-32000),
            "bad key 0123456789abcdef in /v3/0123456789abcdef, QUERYSECRET",
        );
        let shown = error.to_string();
        assert!(!shown.contains("0123456789abcdef") && !shown.contains("QUERYSECRET"), "{shown}");
        assert!(
            shown.starts_with("ethereum rpc https://rpc.example.com:443 eth_blockNumber (code -32000): "),
            "{shown}"
        );
        assert_eq!(error.code(), Some(-32000));

        for bad in ["ftp://host/x", "not a url", "http://:8545/key", "unix:/run/geth.ipc"] {
            let error = EthereumClient::new(bad, Duration::from_secs(1)).expect_err(bad);
            assert!(error.method().is_empty());
        }
    }

    #[test]
    fn invalid_inputs_are_refused_before_any_request() {
        // Port 1 would refuse a connection; these fail earlier, in validation.
        let client = EthereumClient::new("http://127.0.0.1:1", Duration::from_secs(1)).expect("valid");
        let contracts = vec!["0x5fbdb2315678afecb367f032d93f642f64180aa3".to_string()];
        assert_eq!(client.token_transfers(0, 10, &contracts, &[]), Ok(vec![]));
        assert_eq!(client.token_transfers(0, 10, &[], &contracts), Ok(vec![]));
        let error = client.token_transfers(0, 10, &contracts, &["0x1234".to_string()]).expect_err("bad address");
        assert!(error.message().starts_with("invalid request"), "{error}");
        assert!(client.token_transfers(5, 4, &contracts, &contracts).is_err());
        let error = client.receipt("0x1234").expect_err("bad hash");
        assert!(error.message().starts_with("invalid request"), "{error}");
        assert!(client.transaction_known("nothex").is_err());
    }

    /// Serves one canned HTTP response per connection, in order; returns the URL base and
    /// the requests it received (head and body as text).
    fn canned_server(responses: Vec<(u16, &'static str)>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let handle = std::thread::spawn(move || {
            let mut requests = Vec::new();
            for (status, body) in responses {
                let (stream, _) = listener.accept().expect("accept");
                let mut reader = BufReader::new(stream);
                let mut request = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).expect("read");
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().expect("length");
                    }
                    request.push_str(&line);
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                }
                let mut content = vec![0; length];
                reader.read_exact(&mut content).expect("body");
                request.push_str(&String::from_utf8_lossy(&content));
                requests.push(request);
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                reader.get_mut().write_all(reply.as_bytes()).expect("write");
            }
            requests
        });
        (format!("http://{address}"), handle)
    }

    #[test]
    fn node_errors_carry_method_code_and_message() {
        let (base, server) = canned_server(vec![
            (
                200,
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"query returned more than 10000 results"}}"#,
            ),
            (429, r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32029,"message":"rate limited for key SECRETKEY42"}}"#),
            (503, "<html>down</html>"),
            (200, "not json"),
            (200, r#"{"jsonrpc":"2.0","id":5,"result":"0x1b4"}"#),
        ]);
        let client = EthereumClient::new(&format!("http://bob:pa%24%24word@{}/SECRETKEY42", &base[7..]), TIMEOUT)
            .expect("valid");
        let contracts = vec!["0x5fbdb2315678afecb367f032d93f642f64180aa3".to_string()];

        let error = client.token_transfers(0, 1, &contracts, &contracts).expect_err("error object");
        assert_eq!((error.method(), error.code()), ("eth_getLogs", Some(-32005)));
        assert_eq!(error.message(), "query returned more than 10000 results");

        let error = client.block_number().expect_err("429 with an error object");
        assert_eq!(error.code(), Some(-32029));
        assert!(!error.to_string().contains("SECRETKEY42"), "{error}");
        assert!(error.to_string().contains("rate limited for key ***"), "{error}");

        assert_eq!(client.block_number().expect_err("503").message(), "HTTP 503");
        assert!(client.block_number().expect_err("not json").message().contains("not JSON"));
        assert_eq!(client.block_number(), Ok(436));

        let requests = server.join().expect("server");
        // The path (API key) is requested; userinfo goes as Basic auth, decoded once.
        assert!(requests[0].starts_with("POST /SECRETKEY42 HTTP/1.1\r\n"), "{}", requests[0]);
        let basic = base64::engine::general_purpose::STANDARD.encode("bob:pa$$word");
        assert!(requests[0]
            .to_ascii_lowercase()
            .contains(&format!("authorization: basic {}", basic.to_ascii_lowercase())));
        let body: Value =
            serde_json::from_str(&requests[0][requests[0].find("\r\n\r\n").expect("body") + 4..]).expect("JSON body");
        assert_eq!(body["method"], "eth_getLogs");
        assert_eq!(
            body["params"][0]["topics"],
            json!([TRANSFER_TOPIC, null, ["0x0000000000000000000000005fbdb2315678afecb367f032d93f642f64180aa3"]])
        );
        assert_eq!(body["params"][0]["fromBlock"], "0x0");
    }

    const TIMEOUT: Duration = Duration::from_secs(5);
}
