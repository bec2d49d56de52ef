//! Watch-only wallets: the merchant's extended public key, from which a fresh deposit
//! address is derived per invoice index.
//!
//! Only public key material is ever taken. A private key, a WIF key or a recovery phrase
//! pasted by mistake is refused, and no error message ever repeats what was pasted: an
//! error text ends up in logs and HTTP answers, where a secret must never go.
//!
//! - BTC: BIP84 native segwit (P2WPKH). A `zpub`/`vpub` (SLIP-132), a plain `xpub`/`tpub`
//!   account key, or a `wpkh(...)` output descriptor with one ranged key. Bare keys take
//!   the receive chain `/0/*`. Everything is kept as a miniscript descriptor, so what is
//!   stored is what any descriptor wallet (Bitcoin Core, Sparrow) can import to check.
//! - ETH and its ERC-20 tokens (USDT, USDC): BIP44 `m/44'/60'/0'/0/i` from the account
//!   xpub at `m/44'/60'/0'`, addresses EIP-55 checksummed.

use std::fmt;
use std::str::FromStr;

use bitcoin::bip32::{ChildNumber, DerivationPath, Fingerprint, Xpub};
use bitcoin::secp256k1::{PublicKey, Secp256k1};
use bitcoin::{Network, NetworkKind};
use miniscript::descriptor::{DescriptorXKey, Wildcard};
use miniscript::{Descriptor, DescriptorPublicKey};
use sha3::{Digest, Keccak256};

use crate::environment::Environment;
use crate::error::{Error, ErrorKind, Result};
use crate::time::Timestamp;

/// Coins a wallet can be set for: ["BTC", "ETH", "USDT", "USDC"].
pub const WALLET_COINS: &[&str] = &["BTC", "ETH", "USDT", "USDC"];

/// Longer than any key or descriptor this module takes (a descriptor with origin is about
/// 170 characters); the cap keeps the descriptor parser away from pathological input.
const MAX_TEXT_LEN: usize = 1024;

/// First non-hardened index; indexes from here on are hardened and need the private key.
const HARDENED: u32 = 1 << 31;

/// BIP32 version bytes of `xpub` (mainnet) and `tpub` (testnet) keys.
const XPUB_VERSION: [u8; 4] = [0x04, 0x88, 0xB2, 0x1E];
const TPUB_VERSION: [u8; 4] = [0x04, 0x35, 0x87, 0xCF];
/// SLIP-132 version bytes of `zpub` (mainnet) and `vpub` (testnet): BIP84 account keys.
const ZPUB_VERSION: [u8; 4] = [0x04, 0xB2, 0x47, 0x46];
const VPUB_VERSION: [u8; 4] = [0x04, 0x5F, 0x1C, 0xF6];

/// Prefixes of extended private keys (BIP32 and SLIP-132, single-sig and multisig).
const PRIVATE_PREFIXES: &[&str] = &["xprv", "tprv", "zprv", "vprv", "yprv", "uprv", "Zprv", "Vprv", "Yprv", "Uprv"];

const PRIVATE_KEY_RULE: &str =
    "is a private key: give the extended public key (xpub/zpub) instead; a private key never belongs on the server";
const PHRASE_RULE: &str = "is a recovery phrase: give the extended public key (xpub/zpub) instead; \
     a recovery phrase never belongs on the server";

/// A watch-only wallet as the service keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wallet {
    /// The environment it serves.
    pub environment: Environment,
    /// The coin its addresses receive: BTC, ETH, USDT or USDC.
    pub coin: String,
    /// The key as stored: an output descriptor with checksum (BTC) or the account xpub
    /// (ETH and the ERC-20 tokens). Public keys only.
    pub descriptor: String,
    /// The index the next invoice's address is derived at (shared by the coins set to
    /// the same key).
    pub next_index: u32,
    /// The address at index 0: compare it with the first receive address the merchant's
    /// own wallet shows before taking payments.
    pub first_address: String,
    /// When it was first set.
    pub created_at: Timestamp,
    /// When it was last set.
    pub updated_at: Timestamp,
}

/// One watch-only wallet: the public key material a coin's deposit addresses come from.
#[derive(Clone, PartialEq, Eq)]
pub struct WatchOnlyWallet {
    coin: &'static str,
    descriptor: String,
    account_id: String,
    kind: Kind,
}

/// How addresses are derived; the parsed form of `descriptor`.
#[derive(Clone, PartialEq, Eq)]
enum Kind {
    /// A `wpkh(...)` descriptor with one unhardened ranged key: `chain` is its key with the
    /// descriptor's fixed path applied (the receive chain, `/0`), so address `i` costs one
    /// public derivation (`chain/i`) rather than one per path step. `network` is the one
    /// its addresses are written for.
    Bitcoin { chain: Xpub, network: Network },
    /// The BIP44 account key at `m/44'/60'/n'` with its receive chain `/0` applied:
    /// address `i` is `chain/i`.
    Ethereum { chain: Xpub },
}

impl fmt::Debug for WatchOnlyWallet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchOnlyWallet").field("coin", &self.coin).field("descriptor", &self.descriptor).finish()
    }
}

impl WatchOnlyWallet {
    /// Parses what the merchant pasted for `coin` in `environment`.
    ///
    /// BTC takes a `zpub`, `xpub` or `wpkh(...)` descriptor of mainnet in live and a
    /// `vpub`, `tpub` or testnet descriptor in sandbox. ETH, USDT and USDC take the account
    /// xpub at `m/44'/60'/0'`, optionally with its origin (`[fingerprint/44'/60'/0']xpub...`);
    /// the sandbox also takes a tpub. Surrounding whitespace is ignored.
    pub fn parse(coin: &str, text: &str, environment: Environment) -> Result<WatchOnlyWallet> {
        let coin = wallet_coin(coin)?;
        let text = text.trim();
        if text.is_empty() {
            return Err(Error::invalid("wallet", "is empty: give the extended public key (xpub/zpub) of the wallet"));
        }
        // Checked before anything else, so that no later error can describe a secret.
        if let Some(rule) = secret_kind(text) {
            return Err(Error::invalid("wallet", rule));
        }
        if text.len() > MAX_TEXT_LEN {
            return Err(Error::invalid(
                "wallet",
                format!("is longer than {MAX_TEXT_LEN} characters: no extended public key or descriptor is that long"),
            ));
        }
        if coin == "BTC" {
            parse_bitcoin(text, environment)
        } else {
            parse_ethereum(coin, text, environment)
        }
    }

    /// Canonical text to store and to show: for BTC the descriptor with its checksum, for
    /// the Ethereum coins the account xpub (with its origin when one was given). Parsing it
    /// again gives an equal wallet.
    pub fn descriptor(&self) -> &str {
        &self.descriptor
    }

    /// Key that address counters are shared by: two wallets with the same key material and
    /// address kind (e.g. ETH and USDT given the same xpub) get the same account id, so an
    /// address is never handed out twice across coins.
    ///
    /// The key origin (`[fingerprint/path]`) is left out: it documents where the key came
    /// from but changes no address, so a wallet given with and without it is one account.
    pub fn account_id(&self) -> String {
        self.account_id.clone()
    }

    /// Of `existing` account ids, the one whose key is this wallet's key (its public key
    /// and chain code, for the same kind of address) under other metadata: the same key
    /// exported by another tool (another parent fingerprint, `tpub` for `xpub`) has
    /// another text, and a counter of its own would hand out addresses again from 0.
    /// `None` when no other id holds this key.
    pub fn same_key_account<'a>(&self, existing: &'a [String]) -> Option<&'a String> {
        let own = key_of_account_id(&self.account_id)?;
        existing.iter().find(|id| **id != self.account_id && key_of_account_id(id) == Some(own))
    }

    /// The receive address at `index` (0-based). Index must be < 2^31 (non-hardened).
    pub fn address(&self, index: u32) -> Result<String> {
        if index >= HARDENED {
            return Err(Error::invalid(
                "index",
                "must be below 2^31 (2147483648): higher indexes are hardened and cannot be derived from a public key",
            ));
        }
        match &self.kind {
            Kind::Bitcoin { chain, network } => {
                let child = chain.ckd_pub(&SECP, ChildNumber::Normal { index }).map_err(|e| derivation_failed(&e))?;
                Ok(bitcoin::Address::p2wpkh(&bitcoin::CompressedPublicKey(child.public_key), *network).to_string())
            }
            Kind::Ethereum { chain } => {
                let child = chain.ckd_pub(&SECP, ChildNumber::Normal { index }).map_err(|e| derivation_failed(&e))?;
                Ok(ethereum_address(&child.public_key))
            }
        }
    }
}

/// One verification context for the process: building one costs tens of microseconds,
/// more than the derivation itself, and every create that derives an address needs one.
static SECP: std::sync::LazyLock<Secp256k1<bitcoin::secp256k1::VerifyOnly>> =
    std::sync::LazyLock::new(Secp256k1::verification_only);

/// A failure deriving from a key that parsed: for a non-hardened index this happens with
/// probability about 2^-127 per step (BIP32's invalid child), so it is the service's fault
/// rather than the request's.
fn derivation_failed(error: &dyn fmt::Display) -> Error {
    Error::new(ErrorKind::Internal(format!("wallet address derivation failed: {error}")))
}

/// The canonical spelling of a supported coin, case-insensitively.
fn wallet_coin(coin: &str) -> Result<&'static str> {
    WALLET_COINS
        .iter()
        .copied()
        .find(|known| known.eq_ignore_ascii_case(coin.trim()))
        .ok_or_else(|| Error::invalid("coin", format!("a wallet can be set for {} only", WALLET_COINS.join(", "))))
}

/// What kind of secret `text` is, if it looks like one, as the rule to report.
///
/// Looks at each run of letters and digits, so an `xprv` is found inside a descriptor or
/// after a `[fingerprint/path]` origin, but an xpub that merely contains "xprv" somewhere
/// in its base58 is not refused.
fn secret_kind(text: &str) -> Option<&'static str> {
    let bare = text.strip_prefix("0x").unwrap_or(text);
    if bare.len() == 64 && bare.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(PRIVATE_KEY_RULE);
    }
    for token in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if PRIVATE_PREFIXES.iter().any(|prefix| token.starts_with(prefix)) || is_wif(token) {
            return Some(PRIVATE_KEY_RULE);
        }
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() >= 12 && words.iter().all(|w| w.chars().all(|c| c.is_alphabetic())) {
        return Some(PHRASE_RULE);
    }
    None
}

/// Whether `token` is a WIF-encoded private key (mainnet 0x80 or testnet 0xEF, with or
/// without the compression flag).
fn is_wif(token: &str) -> bool {
    if !(51..=52).contains(&token.len()) {
        return false;
    }
    match bitcoin::base58::decode_check(token) {
        Ok(data) => {
            matches!(data.len(), 33 | 34)
                && matches!(data.first(), Some(0x80 | 0xEF))
                && (data.len() == 33 || data.get(33) == Some(&0x01))
        }
        Err(_) => false,
    }
}

/// What a BTC wallet takes in `environment`, as the rule of a refusal.
fn bitcoin_rule(environment: Environment) -> &'static str {
    match environment {
        Environment::Live => "a BTC wallet in live takes a zpub, an xpub or a wpkh(...) descriptor of mainnet",
        Environment::Sandbox => "a BTC wallet in sandbox takes a vpub, a tpub or a wpkh(...) descriptor of testnet",
    }
}

/// The network BTC addresses are written for: testnet addresses (`tb1...`) in sandbox, so
/// a sandbox address can never receive real coins.
fn bitcoin_network(environment: Environment) -> Network {
    match environment {
        Environment::Live => Network::Bitcoin,
        Environment::Sandbox => Network::Testnet,
    }
}

/// Refuses a key of the other network: a testnet key in live would take real payments to
/// addresses no mainnet wallet watches, and the other way round would put real money at
/// stake in the sandbox.
fn check_bitcoin_network(key: &Xpub, environment: Environment) -> Result<()> {
    match (environment, key.network) {
        (Environment::Live, NetworkKind::Test) => Err(Error::invalid(
            "wallet",
            "is a testnet key (tpub/vpub): live takes a mainnet zpub, xpub or wpkh(...) descriptor; \
             testnet keys are for sandbox",
        )),
        (Environment::Sandbox, NetworkKind::Main) => Err(Error::invalid(
            "wallet",
            "is a mainnet key (xpub/zpub): use a testnet tpub/vpub (or a tpub descriptor) in sandbox",
        )),
        _ => Ok(()),
    }
}

fn parse_bitcoin(text: &str, environment: Environment) -> Result<WatchOnlyWallet> {
    let descriptor = if text.contains('(') {
        parse_bitcoin_descriptor(text, environment)?
    } else {
        let (origin, key_text) = split_origin(text)?;
        let key = parse_bitcoin_key(key_text, environment)?;
        check_account_depth(&key, origin.as_ref(), "BTC", "m/84'/0'/0' (m/84'/1'/0' on testnet)")?;
        let xkey = DescriptorXKey {
            origin,
            xkey: key,
            derivation_path: DerivationPath::from(vec![ChildNumber::Normal { index: 0 }]),
            wildcard: Wildcard::Unhardened,
        };
        Descriptor::new_wpkh(DescriptorPublicKey::XPub(xkey))
            .map_err(|_| Error::invalid("wallet", bitcoin_rule(environment)))?
    };
    let Descriptor::Wpkh(wpkh) = &descriptor else {
        return Err(Error::invalid("wallet", bitcoin_rule(environment)));
    };
    let DescriptorPublicKey::XPub(xkey) = wpkh.as_inner() else {
        return Err(Error::invalid("wallet", bitcoin_rule(environment)));
    };
    // The origin is dropped from the account id: it changes no address.
    let key_without_origin = DescriptorPublicKey::XPub(DescriptorXKey { origin: None, ..xkey.clone() });
    let account_id = format!("btc:wpkh({key_without_origin})");
    let chain = xkey.xkey.derive_pub(&*SECP, &xkey.derivation_path).map_err(|e| derivation_failed(&e))?;
    Ok(WatchOnlyWallet {
        coin: "BTC",
        descriptor: descriptor.to_string(),
        account_id,
        kind: Kind::Bitcoin { chain, network: bitcoin_network(environment) },
    })
}

/// A bare BTC key: `zpub`/`vpub` (converted to `xpub`/`tpub`) or `xpub`/`tpub`.
fn parse_bitcoin_key(text: &str, environment: Environment) -> Result<Xpub> {
    let prefix = text.get(..4).unwrap_or("");
    let key = match prefix {
        "zpub" | "vpub" => {
            let (slip132, bip32) =
                if prefix == "zpub" { (ZPUB_VERSION, XPUB_VERSION) } else { (VPUB_VERSION, TPUB_VERSION) };
            let mut data = bitcoin::base58::decode_check(text).map_err(|_| unreadable_key(prefix))?;
            if data.len() != 78 || data.get(..4) != Some(&slip132[..]) {
                return Err(unreadable_key(prefix));
            }
            data[..4].copy_from_slice(&bip32);
            Xpub::decode(&data).map_err(|_| unreadable_key(prefix))?
        }
        "xpub" | "tpub" => Xpub::from_str(text).map_err(|_| unreadable_key(prefix))?,
        "ypub" | "upub" => {
            return Err(Error::invalid(
                "wallet",
                "is a ypub/upub (nested segwit, BIP49): a BTC wallet takes a native segwit (BIP84) zpub/vpub, \
                 an xpub/tpub or a wpkh(...) descriptor",
            ))
        }
        "Zpub" | "Vpub" | "Ypub" | "Upub" => {
            return Err(Error::invalid(
                "wallet",
                "is a multisig key: a BTC wallet takes a single-key zpub/vpub or xpub/tpub",
            ))
        }
        _ => return Err(Error::invalid("wallet", bitcoin_rule(environment))),
    };
    check_bitcoin_network(&key, environment)?;
    Ok(key)
}

fn unreadable_key(prefix: &str) -> Error {
    Error::invalid(
        "wallet",
        format!("starts like a {prefix} but is not a valid one (a character is wrong or missing): copy it again"),
    )
}

/// A `wpkh(...)` descriptor with one ranged, unhardened extended key.
fn parse_bitcoin_descriptor(text: &str, environment: Environment) -> Result<Descriptor<DescriptorPublicKey>> {
    if !text.starts_with("wpkh(") {
        return Err(Error::invalid(
            "wallet",
            "only wpkh(...) descriptors (native segwit, BIP84) are taken; sh(...), wsh(...), tr(...), pkh(...), \
             multi(...) and other script types are not",
        ));
    }
    let descriptor = match Descriptor::<DescriptorPublicKey>::from_str(text) {
        Ok(descriptor) => descriptor,
        Err(_) => {
            // Parsing without the checksum tells a mistyped checksum from a broken body.
            let checksum_wrong =
                text.split_once('#').is_some_and(|(body, _)| Descriptor::<DescriptorPublicKey>::from_str(body).is_ok());
            let rule = if checksum_wrong {
                "the descriptor's checksum (after #) does not match it: copy the descriptor again"
            } else if text.contains("zpub") || text.contains("vpub") {
                "a descriptor takes the key as an xpub/tpub, not a zpub/vpub (a bare zpub/vpub is taken on its own)"
            } else {
                "is not a valid wpkh(...) descriptor with an extended public key, e.g. wpkh([fingerprint/84'/0'/0']xpub.../0/*)"
            };
            return Err(Error::invalid("wallet", rule));
        }
    };
    let Descriptor::Wpkh(wpkh) = &descriptor else {
        return Err(Error::invalid("wallet", "only wpkh(...) descriptors (native segwit, BIP84) are taken"));
    };
    let xkey =
        match wpkh.as_inner() {
            DescriptorPublicKey::XPub(xkey) => xkey,
            DescriptorPublicKey::Single(_) => return Err(Error::invalid(
                "wallet",
                "the descriptor holds a single public key: give an extended key ending in /0/* so each invoice gets \
                 a fresh address",
            )),
            DescriptorPublicKey::MultiXPub(_) => {
                return Err(Error::invalid(
                    "wallet",
                    "multipath descriptors (<0;1>) are not taken: give the receive descriptor, ending in /0/*",
                ))
            }
        };
    match xkey.wildcard {
        Wildcard::Unhardened => {}
        Wildcard::None => {
            return Err(Error::invalid(
                "wallet",
                "the descriptor is not ranged: end the key with /0/* so each invoice gets a fresh address",
            ))
        }
        Wildcard::Hardened => {
            return Err(Error::invalid(
                "wallet",
                "the descriptor's wildcard is hardened (*' or *h), which needs the private key: end the key with /0/*",
            ))
        }
    }
    if xkey.derivation_path.into_iter().any(ChildNumber::is_hardened) {
        return Err(Error::invalid(
            "wallet",
            "the descriptor has a hardened step (' or h) after the key, which needs the private key: give the \
             account xpub and only unhardened steps after it, e.g. xpub.../0/*",
        ));
    }
    check_bitcoin_network(&xkey.xkey, environment)?;
    Ok(descriptor)
}

/// Splits an optional key origin `[fingerprint/path]` off `text`.
fn split_origin(text: &str) -> Result<(Option<(Fingerprint, DerivationPath)>, &str)> {
    let Some(rest) = text.strip_prefix('[') else {
        return Ok((None, text));
    };
    let bad_origin = || {
        Error::invalid(
            "wallet",
            "the key origin must read [fingerprint/path] with an 8-digit hex fingerprint, e.g. [73c5da0a/44'/60'/0']",
        )
    };
    let (origin, key) = rest.split_once(']').ok_or_else(bad_origin)?;
    let (fingerprint, path) = match origin.split_once('/') {
        Some((fingerprint, path)) => (fingerprint, path),
        None => (origin, ""),
    };
    if fingerprint.len() != 8 || !fingerprint.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad_origin());
    }
    let fingerprint = u32::from_str_radix(fingerprint, 16).map_err(|_| bad_origin())?;
    // "m" is not part of an origin; refusing it keeps one spelling per path.
    if path.starts_with('m') {
        return Err(bad_origin());
    }
    let path = DerivationPath::from_str(path).map_err(|_| bad_origin())?;
    Ok((Some((Fingerprint::from(fingerprint.to_be_bytes()), path)), key))
}

/// Refuses keys that are not account keys (depth 3): a master or chain key would derive
/// addresses the merchant's wallet never looks at, so payments would seem lost.
fn check_account_depth(
    key: &Xpub,
    origin: Option<&(Fingerprint, DerivationPath)>,
    coin: &str,
    path: &str,
) -> Result<()> {
    if key.depth != 3 || !key.child_number.is_hardened() {
        return Err(Error::invalid(
            "wallet",
            format!(
                "is not an account key: a {coin} wallet takes the account key at {path} (depth 3); this key is at \
                 depth {}",
                key.depth
            ),
        ));
    }
    if let Some((_, origin_path)) = origin {
        if origin_path.len() != usize::from(key.depth) || origin_path.into_iter().last() != Some(&key.child_number) {
            return Err(Error::invalid("wallet", "the key origin's path does not lead to this key: copy both again"));
        }
    }
    Ok(())
}

fn parse_ethereum(coin: &'static str, text: &str, environment: Environment) -> Result<WatchOnlyWallet> {
    let rule = match environment {
        Environment::Live => {
            "an ETH, USDT or USDC wallet in live takes the account xpub at m/44'/60'/0' \
             (optionally as [fingerprint/44'/60'/0']xpub...)"
        }
        Environment::Sandbox => {
            "an ETH, USDT or USDC wallet in sandbox takes the account xpub or tpub at m/44'/60'/0' \
             (optionally as [fingerprint/44'/60'/0']xpub...)"
        }
    };
    let bare = text.strip_prefix("0x").unwrap_or(text);
    if bare.len() == 40 && bare.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::invalid(
            "wallet",
            format!("is a single address: {rule}, so that each invoice gets a fresh address"),
        ));
    }
    let (origin, key_text) = split_origin(text)?;
    let prefix = key_text.get(..4).unwrap_or("");
    let account = match prefix {
        "xpub" | "tpub" => Xpub::from_str(key_text).map_err(|_| unreadable_key(prefix))?,
        "zpub" | "vpub" | "ypub" | "upub" => {
            return Err(Error::invalid("wallet", format!("is a Bitcoin segwit key ({prefix}): {rule}")))
        }
        _ => return Err(Error::invalid("wallet", rule)),
    };
    // Ethereum addresses are the same on every chain, so any xpub is fine in sandbox; a
    // tpub in live is refused because it marks a key made for testing.
    if environment == Environment::Live && account.network == NetworkKind::Test {
        return Err(Error::invalid("wallet", format!("is a testnet key (tpub), taken in sandbox only: {rule}")));
    }
    if let Some((_, path)) = &origin {
        let steps: Vec<ChildNumber> = path.into_iter().copied().collect();
        let bip44_ethereum = matches!(
            steps.as_slice(),
            [ChildNumber::Hardened { index: 44 }, ChildNumber::Hardened { index: 60 }, ChildNumber::Hardened { .. }]
        );
        if !bip44_ethereum {
            return Err(Error::invalid("wallet", format!("the key origin is not an Ethereum BIP44 account: {rule}")));
        }
    }
    check_account_depth(&account, origin.as_ref(), "ETH", "m/44'/60'/0'")?;
    let descriptor = match &origin {
        Some((fingerprint, path)) => format!("[{fingerprint}/{path}]{account}"),
        None => account.to_string(),
    };
    let chain = account.ckd_pub(&SECP, ChildNumber::Normal { index: 0 }).map_err(|e| derivation_failed(&e))?;
    Ok(WatchOnlyWallet { coin, descriptor, account_id: format!("eth:{account}"), kind: Kind::Ethereum { chain } })
}

/// The kind of address and the key material (public key, chain code) an account id
/// stands for: `eth:<xpub>` or `btc:wpkh(<xpub>/0/*)`, as [`WatchOnlyWallet::account_id`]
/// writes them. `None` for any other text.
fn key_of_account_id(id: &str) -> Option<(&'static str, [u8; 33], [u8; 32])> {
    let (kind, key_text) = match (id.strip_prefix("eth:"), id.strip_prefix("btc:wpkh(")) {
        (Some(key), _) => ("eth", key),
        (_, Some(rest)) => ("btc", rest.strip_suffix("/0/*)")?),
        _ => return None,
    };
    let key = Xpub::from_str(key_text).ok()?;
    Some((kind, key.public_key.serialize(), key.chain_code.to_bytes()))
}

/// The Ethereum address of `key`: the last 20 bytes of keccak256 of the uncompressed
/// point without its 0x04 tag, EIP-55 checksummed.
fn ethereum_address(key: &PublicKey) -> String {
    let uncompressed = key.serialize_uncompressed();
    let hash = Keccak256::digest(&uncompressed[1..]);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    eip55(&address)
}

/// EIP-55 mixed-case checksum: hex letter `i` is upper case when nibble `i` of the keccak256
/// of the lower-case hex is 8 or more. Lets wallets catch a mistyped address.
fn eip55(address: &[u8; 20]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let lower: Vec<u8> = address.iter().flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]]).collect();
    let hash = Keccak256::digest(&lower);
    let mut out = String::with_capacity(42);
    out.push_str("0x");
    for (i, &c) in lower.iter().enumerate() {
        let byte = hash[i / 2];
        let nibble = if i % 2 == 0 { byte >> 4 } else { byte & 0x0f };
        out.push(if nibble >= 8 { char::from(c.to_ascii_uppercase()) } else { char::from(c) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitcoin::bip32::Xpriv;
    use bitcoin::Address;

    const MNEMONIC: &str =
        "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
    /// BIP-84's account 0 key (m/84'/0'/0').
    const BIP84_ZPUB: &str =
        "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";
    const BIP84_RECEIVE_0: &str = "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu";
    const BIP84_RECEIVE_1: &str = "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g";
    const BIP84_CHANGE_0: &str = "bc1q8c6fshw2dlwun7ekn9qwf37cu2rn755upcp6el";
    const ETH_0: &str = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94";
    const ETH_1: &str = "0x6Fac4D18c912343BF86fa7049364Dd4E424Ab9C0";

    fn master(network: Network) -> Xpriv {
        let seed = bip39::Mnemonic::parse(MNEMONIC).expect("mnemonic").to_seed("");
        Xpriv::new_master(network, &seed).expect("master key")
    }

    fn path(text: &str) -> DerivationPath {
        DerivationPath::from_str(text).expect("path")
    }

    /// The extended public key at `at`, derived privately from the mnemonic.
    fn account_xpub(network: Network, at: &str) -> Xpub {
        let secp = Secp256k1::new();
        let xpriv = master(network).derive_priv(&secp, &path(at)).expect("derive");
        Xpub::from_priv(&secp, &xpriv)
    }

    /// The P2WPKH address at `at`, derived with private keys all the way down.
    fn private_p2wpkh(network: Network, at: &str) -> String {
        let secp = Secp256k1::new();
        let xpriv = master(network).derive_priv(&secp, &path(at)).expect("derive");
        Address::p2wpkh(&Xpub::from_priv(&secp, &xpriv).to_pub(), network).to_string()
    }

    fn with_version(key: &Xpub, version: [u8; 4]) -> String {
        let mut data = key.encode().to_vec();
        data[..4].copy_from_slice(&version);
        bitcoin::base58::encode_check(&data)
    }

    fn rule(error: &Error) -> (String, String) {
        match error.kind() {
            ErrorKind::InvalidParameter { field, rule } => (field.clone(), rule.clone()),
            other => panic!("not an invalid-parameter error: {other:?}"),
        }
    }

    fn refused(coin: &str, text: &str, environment: Environment) -> String {
        let error = WatchOnlyWallet::parse(coin, text, environment).expect_err("should be refused");
        let (field, rule) = rule(&error);
        assert_eq!(field, "wallet", "{rule}");
        rule
    }

    fn live(coin: &str, text: &str) -> WatchOnlyWallet {
        WatchOnlyWallet::parse(coin, text, Environment::Live).expect("wallet")
    }

    #[test]
    fn bip84_zpub_is_the_published_one_and_derives_the_published_addresses() {
        let account = account_xpub(Network::Bitcoin, "m/84'/0'/0'");
        assert_eq!(with_version(&account, ZPUB_VERSION), BIP84_ZPUB);
        assert_eq!(private_p2wpkh(Network::Bitcoin, "m/84'/0'/0'/0/0"), BIP84_RECEIVE_0);
        assert_eq!(private_p2wpkh(Network::Bitcoin, "m/84'/0'/0'/0/1"), BIP84_RECEIVE_1);
        assert_eq!(private_p2wpkh(Network::Bitcoin, "m/84'/0'/0'/1/0"), BIP84_CHANGE_0);

        let wallet = live("BTC", BIP84_ZPUB);
        assert_eq!(wallet.coin, "BTC");
        assert_eq!(wallet.address(0).expect("address"), BIP84_RECEIVE_0);
        assert_eq!(wallet.address(1).expect("address"), BIP84_RECEIVE_1);
        assert!(wallet.descriptor().starts_with(&format!("wpkh({account}/0/*)#")), "{}", wallet.descriptor());
    }

    #[test]
    fn bip84_plain_xpub_is_taken_as_wpkh() {
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'").to_string();
        let wallet = live("btc", &format!("  {xpub}\n"));
        assert_eq!(wallet, live("BTC", BIP84_ZPUB));
        assert_eq!(wallet.address(0).expect("address"), BIP84_RECEIVE_0);
        assert_eq!(wallet.address(1).expect("address"), BIP84_RECEIVE_1);
    }

    #[test]
    fn bip84_descriptor_with_origin_gives_receive_and_change_addresses() {
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'");
        let receive = live("BTC", &format!("wpkh([73c5da0a/84'/0'/0']{xpub}/0/*)"));
        assert_eq!(receive.address(0).expect("address"), BIP84_RECEIVE_0);
        assert_eq!(receive.address(1).expect("address"), BIP84_RECEIVE_1);
        let change = live("BTC", &format!("wpkh([73c5da0a/84h/0h/0h]{xpub}/1/*)"));
        assert_eq!(change.address(0).expect("address"), BIP84_CHANGE_0);
        assert_ne!(receive.account_id(), change.account_id());
        // The checksum written by descriptor() is accepted back, and so is the same text
        // with the checksum another tool would print.
        assert_eq!(live("BTC", receive.descriptor()), receive);
        assert!(receive.descriptor().contains("[73c5da0a/84'/0'/0']"), "{}", receive.descriptor());
    }

    #[test]
    fn descriptor_with_a_wrong_checksum_is_refused() {
        let good = live("BTC", BIP84_ZPUB).descriptor().to_string();
        let (body, checksum) = good.split_once('#').expect("checksum");
        let mut wrong: Vec<char> = checksum.chars().collect();
        wrong[0] = if wrong[0] == 'q' { 'p' } else { 'q' };
        let wrong: String = wrong.into_iter().collect();
        let rule = refused("BTC", &format!("{body}#{wrong}"), Environment::Live);
        assert!(rule.contains("checksum"), "{rule}");
        assert!(!rule.contains(body), "{rule}");
    }

    #[test]
    fn descriptor_round_trips_to_an_equal_wallet() {
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'");
        let eth = account_xpub(Network::Bitcoin, "m/44'/60'/0'");
        let tpub = account_xpub(Network::Testnet, "m/84'/1'/0'");
        let cases = [
            ("BTC", BIP84_ZPUB.to_string(), Environment::Live),
            ("BTC", xpub.to_string(), Environment::Live),
            ("BTC", format!("wpkh([73c5da0a/84h/0h/0h]{xpub}/0/*)"), Environment::Live),
            ("BTC", with_version(&tpub, VPUB_VERSION), Environment::Sandbox),
            ("ETH", eth.to_string(), Environment::Live),
            ("USDC", format!("[73C5DA0A/44h/60h/0h]{eth}"), Environment::Live),
            ("USDT", eth.to_string(), Environment::Sandbox),
        ];
        for (coin, text, environment) in cases {
            let wallet = WatchOnlyWallet::parse(coin, &text, environment).expect("wallet");
            let again = WatchOnlyWallet::parse(coin, wallet.descriptor(), environment).expect("reparse");
            assert_eq!(again, wallet, "{text}");
            assert_eq!(again.descriptor(), wallet.descriptor());
            assert!(format!("{wallet:?}").contains(wallet.descriptor()));
        }
    }

    #[test]
    fn bip44_ethereum_addresses_from_the_account_xpub() {
        let secp = Secp256k1::new();
        let root = master(Network::Bitcoin);
        let account = account_xpub(Network::Bitcoin, "m/44'/60'/0'");
        for (coin, text) in [("ETH", account.to_string()), ("USDT", format!("[73c5da0a/44'/60'/0']{account}"))] {
            let wallet = live(coin, &text);
            assert_eq!(wallet.coin, coin);
            assert_eq!(wallet.descriptor(), text);
            assert_eq!(wallet.address(0).expect("address"), ETH_0);
            assert_eq!(wallet.address(1).expect("address"), ETH_1);
            for index in [0, 1, 7] {
                let child = root.derive_priv(&secp, &path(&format!("m/44'/60'/0'/0/{index}"))).expect("derive");
                let private = ethereum_address(&child.private_key.public_key(&secp));
                assert_eq!(wallet.address(index).expect("address"), private);
            }
        }
    }

    #[test]
    fn ethereum_refusals() {
        let account = account_xpub(Network::Bitcoin, "m/44'/60'/0'");
        // An origin that is not 44'/60'/n'.
        let rule = refused("ETH", &format!("[73c5da0a/84'/0'/0']{account}"), Environment::Live);
        assert!(rule.contains("origin"), "{rule}");
        let rule = refused("ETH", &format!("[73c5da0a/44'/60'/0'{account}"), Environment::Live);
        assert!(rule.contains("origin"), "{rule}");
        // Master and change-level keys would derive addresses no wallet watches.
        let master_key = account_xpub(Network::Bitcoin, "m");
        let rule = refused("ETH", &master_key.to_string(), Environment::Live);
        assert!(rule.contains("depth 0"), "{rule}");
        let chain = account_xpub(Network::Bitcoin, "m/44'/60'/0'/0");
        assert!(refused("ETH", &chain.to_string(), Environment::Live).contains("depth 4"));
        // A zpub is a Bitcoin key; an address is not a wallet.
        assert!(refused("ETH", BIP84_ZPUB, Environment::Live).contains("Bitcoin"));
        assert!(refused("ETH", ETH_0, Environment::Live).contains("single address"));
        // tpub: sandbox only.
        let tpub = account_xpub(Network::Testnet, "m/44'/60'/0'");
        assert!(refused("ETH", &tpub.to_string(), Environment::Live).contains("sandbox"));
        let sandbox = WatchOnlyWallet::parse("ETH", &tpub.to_string(), Environment::Sandbox).expect("tpub");
        assert_eq!(sandbox.address(0).expect("address"), ETH_0);
    }

    #[test]
    fn eip55_spec_examples_round_trip() {
        for expected in [
            "0x52908400098527886E0F7030069857D2E4169EE7",
            "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
            "0xde709f2102306220921060314715629080e2fb77",
            "0x27b1fdb04752bbc536007a920d24acb045561c26",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
        ] {
            let hex = expected[2..].to_ascii_lowercase();
            let mut bytes = [0u8; 20];
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex");
            }
            assert_eq!(eip55(&bytes), expected);
        }
    }

    #[test]
    fn private_keys_and_phrases_are_refused_without_echo() {
        let secp = Secp256k1::new();
        let xprv = master(Network::Bitcoin).derive_priv(&secp, &path("m/84'/0'/0'")).expect("derive");
        let tprv = master(Network::Testnet);
        let wif = bitcoin::PrivateKey::new(xprv.private_key, Network::Bitcoin).to_wif();
        let texts = [
            xprv.to_string(),
            tprv.to_string(),
            with_version_priv(&xprv, [0x04, 0xB2, 0x43, 0x0C]), // zprv
            format!("wpkh([73c5da0a/84'/0'/0']{xprv}/0/*)"),
            format!("[73c5da0a/44'/60'/0']{xprv}"),
            wif.clone(),
            format!("wpkh({wif})"),
            "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318".to_string(),
            "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318".to_string(),
        ];
        for text in &texts {
            for coin in WALLET_COINS {
                for environment in [Environment::Live, Environment::Sandbox] {
                    let error = WatchOnlyWallet::parse(coin, text, environment).expect_err("private key taken");
                    let message = error.to_string();
                    assert!(message.contains("is a private key"), "{message}");
                    assert!(message.contains("never belongs on the server"), "{message}");
                    assert!(!message.contains(&text[text.len() - 20..]), "echoed: {message}");
                }
            }
        }
        let rule = refused("BTC", MNEMONIC, Environment::Live);
        assert!(rule.contains("recovery phrase") && !rule.contains("abandon"), "{rule}");
    }

    fn with_version_priv(key: &Xpriv, version: [u8; 4]) -> String {
        let mut data = key.encode().to_vec();
        data[..4].copy_from_slice(&version);
        bitcoin::base58::encode_check(&data)
    }

    #[test]
    fn keys_of_the_other_network_are_refused() {
        let tpub = account_xpub(Network::Testnet, "m/84'/1'/0'");
        let vpub = with_version(&tpub, VPUB_VERSION);
        for text in [tpub.to_string(), vpub, format!("wpkh({tpub}/0/*)")] {
            let rule = refused("BTC", &text, Environment::Live);
            assert!(rule.contains("sandbox"), "{rule}");
        }
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'");
        for text in [BIP84_ZPUB.to_string(), xpub.to_string(), format!("wpkh({xpub}/0/*)")] {
            let rule = refused("BTC", &text, Environment::Sandbox);
            assert!(rule.contains("tpub/vpub") && rule.contains("sandbox"), "{rule}");
        }
    }

    #[test]
    fn sandbox_takes_vpub_and_tpub_and_gives_testnet_addresses() {
        let tpub = account_xpub(Network::Testnet, "m/84'/1'/0'");
        let expected = private_p2wpkh(Network::Testnet, "m/84'/1'/0'/0/0");
        let expected_5 = private_p2wpkh(Network::Testnet, "m/84'/1'/0'/0/5");
        for text in [tpub.to_string(), with_version(&tpub, VPUB_VERSION), format!("wpkh({tpub}/0/*)")] {
            let wallet = WatchOnlyWallet::parse("BTC", &text, Environment::Sandbox).expect("sandbox wallet");
            let address = wallet.address(0).expect("address");
            assert!(address.starts_with("tb1q"), "{address}");
            assert_eq!(address, expected);
            assert_eq!(wallet.address(5).expect("address"), expected_5);
        }
    }

    #[test]
    fn garbage_and_other_script_types_are_refused() {
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'");
        let master_key = account_xpub(Network::Bitcoin, "m");
        let ypub = with_version(&xpub, [0x04, 0x9D, 0x7C, 0xB2]);
        let cases: Vec<(String, &str)> = vec![
            ("hello".into(), "zpub"),
            ("".into(), "is empty"),
            ("   ".into(), "is empty"),
            ("zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYt".into(), "not a valid one"),
            (BIP84_ZPUB[..60].into(), "not a valid one"),
            ("xpub!".into(), "not a valid one"),
            (ypub, "BIP49"),
            (master_key.to_string(), "depth 0"),
            (format!("sh(wpkh({xpub}/0/*))"), "only wpkh"),
            (format!("tr({xpub}/0/*)"), "only wpkh"),
            (format!("wsh(multi(1,{xpub}/0/*))"), "only wpkh"),
            (format!("wpkh({xpub}/0/0)"), "not ranged"),
            (format!("wpkh({xpub}/0/*h)"), "hardened"),
            (format!("wpkh({xpub}/0h/*)"), "hardened"),
            (format!("wpkh({xpub}/<0;1>/*)"), "multipath"),
            ("wpkh(02e6642fd69bd211f93f7f1f36ca51a26a5290eb2dd1b0d8279a87bb0d480c8443)".into(), "single public key"),
            (format!("wpkh({BIP84_ZPUB}/0/*)"), "not a zpub"),
            ("wpkh(".into(), "not a valid wpkh"),
            (format!("wpkh({xpub}/0/*)#"), "checksum"),
            ("x".repeat(5000), "longer than"),
        ];
        for (text, expected) in cases {
            let rule = refused("BTC", &text, Environment::Live);
            assert!(rule.contains(expected), "{text:?}: {rule}");
        }
        for text in ["hello", "[zz/1]xpub", "[", "]", "[12345678/44'/60'/0'", "0x", "ĳxpub", "xpub😀😀😀"] {
            refused("ETH", text, Environment::Live);
        }
    }

    #[test]
    fn odd_input_never_panics() {
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'").to_string();
        let mut texts: Vec<String> = vec![
            "(".into(),
            "wpkh(((((((((((((".into(),
            "wpkh()#".into(),
            "#".into(),
            "[]".into(),
            "[/]xpub".into(),
            "[73c5da0a/4294967295']xpub".into(),
            "[73c5da0a/']xpub".into(),
            "[73c5da0a/h]xpub".into(),
            "[73c5da0ä]xpub".into(),
            "\u{0}\u{7f}\u{ff}".into(),
            "wpkh(ä)#ééé".into(),
            format!("wpkh({xpub}/2147483648/*)"),
            format!("wpkh({xpub}/0/*)#ä"),
        ];
        for cut in [1, 3, 4, 5, 50, 110] {
            texts.push(xpub.chars().take(cut).collect());
            texts.push(format!("wpkh({})", xpub.chars().take(cut).collect::<String>()));
        }
        for text in &texts {
            for coin in WALLET_COINS {
                for environment in [Environment::Live, Environment::Sandbox] {
                    assert!(WatchOnlyWallet::parse(coin, text, environment).is_err(), "{coin} {text:?}");
                }
            }
        }
    }

    #[test]
    fn hardened_indexes_are_refused() {
        let account = account_xpub(Network::Bitcoin, "m/44'/60'/0'").to_string();
        for wallet in [live("BTC", BIP84_ZPUB), live("ETH", &account)] {
            assert!(wallet.address(HARDENED - 1).is_ok());
            for index in [HARDENED, u32::MAX] {
                let error = wallet.address(index).expect_err("hardened index");
                assert_eq!(rule(&error).0, "index");
            }
        }
    }

    #[test]
    fn unsupported_coins_are_refused() {
        for coin in ["SOL", "", "LTC", "BTC2"] {
            let error = WatchOnlyWallet::parse(coin, BIP84_ZPUB, Environment::Live).expect_err("coin");
            let (field, rule) = rule(&error);
            assert_eq!(field, "coin");
            assert!(WALLET_COINS.iter().all(|known| rule.contains(known)), "{rule}");
        }
    }

    #[test]
    fn account_ids_are_shared_by_key_material_and_address_kind() {
        let account = account_xpub(Network::Bitcoin, "m/44'/60'/0'");
        let eth = live("ETH", &account.to_string());
        let usdt = live("USDT", &account.to_string());
        let usdc = live("USDC", &format!("[73c5da0a/44'/60'/0']{account}"));
        assert_eq!(eth.account_id(), usdt.account_id());
        assert_eq!(eth.account_id(), usdc.account_id());
        assert_eq!(eth.account_id(), format!("eth:{account}"));
        assert_ne!(eth, usdt);

        // The same key as BTC is another address kind, so another counter.
        let btc_same_key = live("BTC", &account.to_string());
        assert_ne!(btc_same_key.account_id(), eth.account_id());

        let btc = live("BTC", BIP84_ZPUB);
        let xpub = account_xpub(Network::Bitcoin, "m/84'/0'/0'");
        assert_eq!(btc.account_id(), format!("btc:wpkh({xpub}/0/*)"));
        assert_eq!(live("BTC", &format!("wpkh([73c5da0a/84'/0'/0']{xpub}/0/*)")).account_id(), btc.account_id());
        assert_eq!(live("BTC", &xpub.to_string()).account_id(), btc.account_id());
    }
}
