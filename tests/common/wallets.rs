//! Published test keys for watch-only wallets: BIP84's and BIP44's vectors of the
//! mnemonic "abandon ×11 about", derived here from the mnemonic with the `bitcoin` and
//! `bip39` crates, independently of the library's own derivation.

#![allow(dead_code)]

use std::str::FromStr;

use bitcoin::bip32::{DerivationPath, Xpriv, Xpub};
use bitcoin::secp256k1::Secp256k1;

/// The BIP39 test mnemonic behind BIP84's and BIP44's vectors.
pub const MNEMONIC: &str =
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
/// BIP84's account key m/84'/0'/0' of [`MNEMONIC`], as the BIP prints it.
pub const BIP84_ZPUB: &str =
    "zpub6rFR7y4Q2AijBEqTUquhVz398htDFrtymD9xYYfG1m4wAcvPhXNfE3EfH1r1ADqtfSdVCToUG868RvUUkgDKf31mGDtKsAYz2oz2AGutZYs";
/// BIP84's first three receive addresses of that key.
pub const BIP84_ADDRESSES: [&str; 3] = [
    "bc1qcr8te4kr609gcawutmrza0j4xv80jy8z306fyu",
    "bc1qnjg0jd8228aq7egyzacy8cys3knf9xvrerkf9g",
    "bc1qp59yckz4ae5c4efgw2s5wfyvrz0ala7rgvuz8z",
];
/// The Ethereum address m/44'/60'/0'/0/0 of [`MNEMONIC`].
pub const BIP44_ETH_ADDRESS_0: &str = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94";

/// The extended public key of [`MNEMONIC`] at `path`, for `network`.
pub fn account_xpub(network: bitcoin::NetworkKind, path: &str) -> String {
    let seed = bip39::Mnemonic::parse(MNEMONIC).expect("mnemonic").to_seed("");
    let secp = Secp256k1::new();
    let master = Xpriv::new_master(network, &seed).expect("master key");
    let account = master.derive_priv(&secp, &DerivationPath::from_str(path).expect("path")).expect("derive");
    Xpub::from_priv(&secp, &account).to_string()
}

/// The Ethereum account xpub (m/44'/60'/0') of [`MNEMONIC`].
pub fn ethereum_account_xpub() -> String {
    account_xpub(bitcoin::NetworkKind::Main, "m/44'/60'/0'")
}
