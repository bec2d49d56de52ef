//! The Ethereum JSON-RPC client (`coinorder::chain::ethereum`) against a real local chain:
//! anvil from `npm ci`, one instance per test on a port of its choosing.

#[path = "support/anvil.rs"]
mod anvil;

use std::time::Duration;

use anvil::Anvil;
use coinorder::chain::ethereum::{units_to_decimal, EthTransfer, EthereumClient, TokenTransfer, TRANSFER_TOPIC};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Addresses nothing has touched on a fresh anvil chain.
const MERCHANT: &str = "0x00000000000000000000000000000000c0ffee01";
const OTHER: &str = "0x00000000000000000000000000000000c0ffee02";

fn client(anvil: &Anvil) -> EthereumClient {
    EthereumClient::new(&anvil.url(), TIMEOUT).expect("anvil's URL is valid")
}

fn upper(address: &str) -> String {
    format!("0x{}", address.trim_start_matches("0x").to_ascii_uppercase())
}

#[test]
fn native_transfer_is_in_its_block_with_the_exact_wei() {
    let anvil = Anvil::start();
    let client = client(&anvil);
    assert_eq!(client.block_number().expect("height"), anvil.block_number());
    let payer = anvil.accounts()[0].clone();

    // 1.234567890123456789 ETH: every one of the 18 decimals must survive.
    let wei = 1_234_567_890_123_456_789u128;
    let tx = anvil.send_eth(&payer, MERCHANT, wei);
    let height = client.block_number().expect("height");
    assert_eq!(height, anvil.block_number());

    let block = client.block(height).expect("block").expect("the block of the payment exists");
    assert_eq!(block.number, height);
    assert_eq!(block.transfers, vec![EthTransfer { tx_hash: tx.clone(), to: MERCHANT.to_string(), wei }]);
    assert_eq!(units_to_decimal(wei, 18).map(|d| d.to_string()).as_deref(), Some("1.234567890123456789"));
    assert_eq!(client.block(height + 1).expect("no error for a future block"), None);

    let receipt = client.receipt(&tx).expect("receipt").expect("mined at once (automine)");
    assert_eq!(
        (receipt.block_number, receipt.block_hash.as_str(), receipt.succeeded),
        (height, block.hash.as_str(), true)
    );
    assert!(client.transaction_known(&upper(&tx)).expect("by hash, any case"));
    let unknown = format!("0x{}", "ab".repeat(32));
    assert_eq!(client.receipt(&unknown).expect("no error for an unknown hash"), None);
    assert!(!client.transaction_known(&unknown).expect("unknown"));

    // A contract creation (no `to`) is not a transfer, even with value in its block.
    let token = anvil.deploy_token(&payer);
    let deployed = client.block(client.block_number().expect("height")).expect("block").expect("exists");
    assert!(deployed.transfers.is_empty(), "{deployed:?}");
    assert!(token.starts_with("0x"));
}

#[test]
fn token_transfers_find_exactly_the_payment() {
    let anvil = Anvil::start();
    let client = client(&anvil);
    let payer = anvil.accounts()[0].clone();
    let token = anvil.deploy_token(&payer);
    let other_token = anvil.deploy_token(&payer);
    let start = anvil.block_number();

    let tx = anvil.send_token(&token, &payer, MERCHANT, 12_500_000);
    anvil.send_token(&token, &payer, OTHER, 7);
    anvil.send_token(&other_token, &payer, MERCHANT, 99);
    let head = anvil.block_number();
    let receipt = client.receipt(&tx).expect("receipt").expect("mined");

    // Addresses in any case in, lowercase out.
    let found = client.token_transfers(start, head, &[upper(&token)], &[upper(MERCHANT)]).expect("logs");
    assert_eq!(
        found,
        vec![TokenTransfer {
            tx_hash: tx,
            log_index: 0,
            contract: token.clone(),
            to: MERCHANT.to_string(),
            units: 12_500_000,
            block_number: receipt.block_number,
            block_hash: receipt.block_hash,
        }]
    );
    assert_eq!(units_to_decimal(found[0].units, 6).map(|d| d.normalize().to_string()).as_deref(), Some("12.5"));

    let to_other =
        client.token_transfers(start, head, std::slice::from_ref(&token), &[OTHER.to_string()]).expect("logs");
    assert_eq!(to_other.iter().map(|t| t.units).collect::<Vec<_>>(), vec![7]);
    let both = client.token_transfers(0, head, &[token.clone(), other_token.clone()], &[MERCHANT.to_string()]);
    assert_eq!(
        both.expect("logs").iter().map(|t| (t.contract.clone(), t.units)).collect::<Vec<_>>(),
        vec![(token.clone(), 12_500_000), (other_token.clone(), 99)]
    );
    // The payer's mint in the constructor is a Transfer too, found only for the payer.
    let minted =
        client.token_transfers(0, head, std::slice::from_ref(&token), std::slice::from_ref(&payer)).expect("logs");
    assert_eq!(minted.iter().map(|t| t.units).collect::<Vec<_>>(), vec![1_000_000_000_000_000]);
    // A range that ends before the payment, and no recipients at all, find nothing.
    assert_eq!(client.token_transfers(0, start, std::slice::from_ref(&token), &[MERCHANT.to_string()]), Ok(vec![]));
    assert_eq!(client.token_transfers(0, head, &[token], &[]), Ok(vec![]));
    assert!(TRANSFER_TOPIC.starts_with("0xddf252ad"));
}

#[test]
fn receipt_appears_once_the_transaction_is_mined() {
    let anvil = Anvil::start();
    let client = client(&anvil);
    let payer = anvil.accounts()[1].clone();
    anvil.set_automine(false);

    let tx = anvil.send_eth(&payer, MERCHANT, 1);
    assert_eq!(client.receipt(&tx).expect("receipt"), None, "pending: no receipt yet");
    assert!(client.transaction_known(&tx).expect("known"), "pending transactions are known");
    let before = anvil.block_number();

    anvil.mine(3);
    let receipt = client.receipt(&tx).expect("receipt").expect("mined");
    assert_eq!(receipt.block_number, before + 1, "mined in the first of the new blocks");
    assert!(receipt.succeeded);
    assert_eq!(client.block_number().expect("height"), before + 3);
    let block = client.block(before + 1).expect("block").expect("exists");
    assert_eq!(block.hash, receipt.block_hash);
}

#[test]
fn reorg_takes_the_payment_away() {
    let anvil = Anvil::start();
    let client = client(&anvil);
    let payer = anvil.accounts()[0].clone();
    let token = anvil.deploy_token(&payer);

    let eth_tx = anvil.send_eth(&payer, MERCHANT, 5_000_000_000_000_000);
    let token_tx = anvil.send_token(&token, &payer, MERCHANT, 12_500_000);
    anvil.mine(2);
    let head = anvil.block_number();
    let eth_block = client.receipt(&eth_tx).expect("receipt").expect("mined");
    let token_block = client.receipt(&token_tx).expect("receipt").expect("mined");
    assert_eq!((eth_block.block_number, token_block.block_number), (head - 3, head - 2));
    let found =
        client.token_transfers(eth_block.block_number, head, std::slice::from_ref(&token), &[MERCHANT.to_string()]);
    assert_eq!(found.expect("logs").len(), 1);

    // What anvil 1.7 does with `anvil_reorg [depth, []]`: the last `depth` blocks are
    // replaced by as many new, empty ones. The height stays, every replaced height has a
    // new hash, and the replaced blocks' transactions are not put back in the pool: their
    // receipts are gone and the node no longer knows them. For the watcher that is a
    // payment that vanished (receipt None, transaction_known false), told apart from a
    // payment still pending (receipt None, transaction_known true).
    anvil.reorg(head - eth_block.block_number + 1);
    assert_eq!(client.block_number().expect("height"), head, "the height stays");
    let replaced = client.block(eth_block.block_number).expect("block").expect("the height still exists");
    assert_ne!(replaced.hash, eth_block.block_hash, "the block at that height is another one");
    assert!(replaced.transfers.is_empty(), "{replaced:?}");
    for tx in [&eth_tx, &token_tx] {
        assert_eq!(client.receipt(tx).expect("receipt"), None, "no receipt after the reorg");
        assert!(!client.transaction_known(tx).expect("known"), "dropped, not re-queued");
    }
    assert_eq!(client.token_transfers(0, head, std::slice::from_ref(&token), &[MERCHANT.to_string()]), Ok(vec![]));
    assert_eq!(anvil.rpc("eth_getBalance", serde_json::json!([MERCHANT, "latest"])), serde_json::json!("0x0"));

    // The same payment sent again lands in a new block with a new receipt.
    let again = anvil.send_token(&token, &payer, MERCHANT, 12_500_000);
    let receipt = client.receipt(&again).expect("receipt").expect("mined");
    assert_eq!(receipt.block_number, head + 1);
}

#[test]
fn snapshot_revert_rolls_the_chain_back() {
    let anvil = Anvil::start();
    let client = client(&anvil);
    let payer = anvil.accounts()[0].clone();
    let before = anvil.block_number();
    let snapshot = anvil.snapshot();

    let tx = anvil.send_eth(&payer, MERCHANT, 42);
    anvil.mine(1);
    let receipt = client.receipt(&tx).expect("receipt").expect("mined");

    // Unlike anvil_reorg, evm_revert lowers the height: the payment's block no longer
    // exists at all until the chain grows past it again, with other blocks.
    anvil.revert(&snapshot);
    assert_eq!(client.block_number().expect("height"), before);
    assert_eq!(client.block(receipt.block_number).expect("block"), None);
    assert_eq!(client.receipt(&tx).expect("receipt"), None);
    assert!(!client.transaction_known(&tx).expect("known"));
    anvil.mine(2);
    let regrown = client.block(receipt.block_number).expect("block").expect("exists again");
    assert_ne!(regrown.hash, receipt.block_hash);
    assert!(regrown.transfers.is_empty());
}

#[test]
fn errors_show_neither_credentials_nor_api_key() {
    // Port 1: connection refused, nothing to start.
    let client = EthereumClient::new("http://user:secret@127.0.0.1:1/KEY", Duration::from_secs(5)).expect("valid URL");
    let error = client.block_number().expect_err("nothing listens on port 1");
    let shown = error.to_string();
    assert!(!shown.contains("secret") && !shown.contains("KEY"), "{shown}");
    assert!(shown.contains("http://127.0.0.1:1") && shown.contains("eth_blockNumber"), "{shown}");
    let debug = format!("{client:?} {error:?}");
    assert!(!debug.contains("secret") && !debug.contains("KEY"), "{debug}");
}

#[test]
fn a_tokens_decimals_are_asked_of_its_contract() {
    let anvil = Anvil::start();
    let client = client(&anvil);
    let payer = anvil.accounts()[0].clone();
    let six = anvil.deploy_token(&payer);
    let eighteen = anvil.deploy_token_with_decimals(&payer, 18);
    assert_eq!(client.token_decimals(&six).expect("decimals"), Some(6));
    assert_eq!(client.token_decimals(&upper(&eighteen)).expect("any case"), Some(18));
    // An account with no code answers an empty result: it declares nothing.
    assert_eq!(client.token_decimals(MERCHANT).expect("no code"), None);
    // A contract that reverts (PUSH1 0, PUSH1 0, REVERT), and one that returns a word
    // too big for a uint8 (PUSH2 0x0100, PUSH1 0, MSTORE, PUSH1 32, PUSH1 0, RETURN).
    anvil.rpc("anvil_setCode", serde_json::json!([OTHER, "0x60006000fd"]));
    assert_eq!(client.token_decimals(OTHER).expect("reverted"), None);
    anvil.rpc("anvil_setCode", serde_json::json!([OTHER, "0x61010060005260206000f3"]));
    assert_eq!(client.token_decimals(OTHER).expect("not a uint8"), None);
    assert!(client.token_decimals("0x1234").is_err(), "not an address");
}
