//! Watch-only wallets (issue 14): each new invoice gets the next address derived from
//! the merchant's extended public key, its index taken in the order's own transaction.
//! Runs on SQLite, and on PostgreSQL under `scripts/test-postgres`.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use coinorder::{CreateOrder, Environment, ErrorKind, Merchant, Service};
use common::wallets::{account_xpub, ethereum_account_xpub, BIP44_ETH_ADDRESS_0, BIP84_ADDRESSES, BIP84_ZPUB};
use common::{harness_with, Harness};

/// A live harness with rates for BTC, ETH and USDT in USD.
fn live() -> Harness {
    let shop = harness_with(Environment::Live, |_| {});
    for (coin, rate) in [("BTC", "50000"), ("ETH", "2500"), ("USDT", "1"), ("USDC", "1")] {
        shop.svc.set_rate(coin, "USD", rate.parse().expect("rate"), None).expect("set rate");
    }
    shop
}

fn merchant(shop: &Harness) -> Merchant {
    shop.svc.authenticate(Some(&shop.key)).expect("authenticate")
}

fn order_in(coin: &str, reference: Option<String>) -> CreateOrder {
    CreateOrder {
        currency: "USD".into(),
        amount: "25".parse().expect("amount"),
        pay_currency: Some(coin.into()),
        merchant_order_id: reference,
        ..Default::default()
    }
}

#[test]
fn eight_threads_of_live_orders_get_every_index_once_with_no_gap() {
    let shop = live();
    shop.svc.set_wallet("BTC", BIP84_ZPUB).expect("set wallet");
    let merchant = merchant(&shop);
    let service: &Service = &shop.svc;
    let (threads, per_thread) = (8, 200);
    let created: Vec<(u32, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let merchant = merchant.clone();
                scope.spawn(move || {
                    (0..per_thread)
                        .map(|_| {
                            let order = service.create_order(&merchant, &order_in("BTC", None)).expect("create");
                            let invoice = order.order.invoice;
                            (invoice.derivation_index.expect("derived"), invoice.address)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().expect("worker")).collect()
    });
    let total = threads * per_thread;
    let mut indexes: Vec<u32> = created.iter().map(|(index, _)| *index).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..total as u32).collect::<Vec<_>>(), "every index once, none skipped");
    let addresses: HashSet<&String> = created.iter().map(|(_, address)| address).collect();
    assert_eq!(addresses.len(), total, "{total} distinct addresses");
    // Each stored address is the wallet's address at the stored index.
    for (index, address) in created.iter().filter(|(index, _)| *index < 2 || index % 97 == 0) {
        assert_eq!(&shop.svc.wallet_address("BTC", *index).expect("address"), address);
    }
    let first = created.iter().find(|(index, _)| *index == 0).expect("index 0");
    assert_eq!(first.1, BIP84_ADDRESSES[0]);
    let wallets = shop.svc.wallets().expect("wallets");
    assert_eq!(wallets[0].next_index, total as u32);
}

#[test]
fn a_derived_address_is_stored_shown_and_kept_by_an_idempotent_retry() {
    let shop = live();
    let wallet = shop.svc.set_wallet("btc", BIP84_ZPUB).expect("set wallet");
    assert_eq!(wallet.coin, "BTC");
    assert_eq!(wallet.first_address, BIP84_ADDRESSES[0]);
    assert!(wallet.descriptor.starts_with("wpkh(xpub"), "{}", wallet.descriptor);
    let merchant = merchant(&shop);
    let first = shop.svc.create_order(&merchant, &order_in("BTC", Some("shop-1".into()))).expect("create");
    let invoice = &first.order.invoice;
    assert_eq!((invoice.derivation_index, invoice.address.as_str()), (Some(0), BIP84_ADDRESSES[0]));
    assert!(invoice.payment_uri.starts_with(&format!("bitcoin:{}?amount=0.0005", BIP84_ADDRESSES[0])));
    // Get Order shows it (the 201 body of spec §4.1 has no invoice).
    let got = shop.get(&format!("/v1/orders/{}", first.order.order.order_id)).json();
    assert_eq!(got["invoice"]["address"], BIP84_ADDRESSES[0], "{got}");
    // A retry of the same create replays it: no new index taken.
    let again = shop.svc.create_order(&merchant, &order_in("BTC", Some("shop-1".into()))).expect("replay");
    assert!(again.replayed);
    assert_eq!(again.order.invoice.address, BIP84_ADDRESSES[0]);
    let second = shop.svc.create_order(&merchant, &order_in("BTC", None)).expect("create");
    assert_eq!(second.order.invoice.address, BIP84_ADDRESSES[1]);
    // Coins without a wallet keep no derived address.
    let eth = shop.svc.create_order(&merchant, &order_in("ETH", None)).expect("create");
    assert_eq!((eth.order.invoice.derivation_index, eth.order.invoice.address.as_str()), (None, ""));
}

#[test]
fn coins_set_to_one_key_share_its_counter_and_a_reset_key_never_goes_back() {
    let shop = live();
    let xpub = ethereum_account_xpub();
    let eth = shop.svc.set_wallet("ETH", &xpub).expect("set ETH");
    assert_eq!(eth.first_address, BIP44_ETH_ADDRESS_0);
    shop.svc.set_wallet("USDT", &xpub).expect("set USDT");
    let merchant = merchant(&shop);
    let a = shop.svc.create_order(&merchant, &order_in("ETH", None)).expect("ETH order").order.invoice;
    let b = shop.svc.create_order(&merchant, &order_in("USDT", None)).expect("USDT order").order.invoice;
    assert_eq!((a.derivation_index, b.derivation_index), (Some(0), Some(1)));
    assert_eq!(a.address, BIP44_ETH_ADDRESS_0);
    assert_ne!(a.address, b.address, "one key, two coins, never one address twice");
    assert!(b.payment_uri.contains(&format!("/transfer?address={}", b.address)), "{}", b.payment_uri);

    assert!(shop.svc.remove_wallet("usdt").expect("remove"));
    assert!(!shop.svc.remove_wallet("USDT").expect("remove again"));
    let plain = shop.svc.create_order(&merchant, &order_in("USDT", None)).expect("order").order.invoice;
    assert_eq!(plain.derivation_index, None);
    shop.svc.set_wallet("USDT", &xpub).expect("set again");
    let c = shop.svc.create_order(&merchant, &order_in("USDT", None)).expect("order").order.invoice;
    assert_eq!(c.derivation_index, Some(2), "the counter belongs to the key and only grows");
    let listed: Vec<(String, u32)> =
        shop.svc.wallets().expect("list").into_iter().map(|w| (w.coin, w.next_index)).collect();
    assert_eq!(listed, vec![("ETH".to_string(), 3), ("USDT".to_string(), 3)]);
}

#[test]
fn the_same_key_exported_with_other_metadata_keeps_its_counter() {
    // One key, as two tools export it: with its real parent fingerprint, and with a zero
    // one. Before, the second was a new counter, which handed out index 0 again.
    let shop = live();
    let xpub = ethereum_account_xpub();
    let mut other: bitcoin::bip32::Xpub = xpub.parse().expect("xpub");
    other.parent_fingerprint = bitcoin::bip32::Fingerprint::default();
    let other = other.to_string();
    assert_ne!(other, xpub);
    shop.svc.set_wallet("ETH", &xpub).expect("set ETH");
    let merchant = merchant(&shop);
    let first = shop.svc.create_order(&merchant, &order_in("ETH", None)).expect("order").order.invoice;
    let again = shop.svc.set_wallet("ETH", &other).expect("set ETH again");
    assert_eq!(again.first_address, BIP44_ETH_ADDRESS_0, "the same key");
    assert_eq!(again.next_index, 1, "its counter, not a new one");
    let second = shop.svc.create_order(&merchant, &order_in("ETH", None)).expect("order").order.invoice;
    assert_eq!((first.derivation_index, second.derivation_index), (Some(0), Some(1)));
    assert_ne!(first.address, second.address);
    // USDT given that text shares the counter too.
    shop.svc.set_wallet("USDT", &other).expect("set USDT");
    let third = shop.svc.create_order(&merchant, &order_in("USDT", None)).expect("order").order.invoice;
    assert_eq!(third.derivation_index, Some(2));
    // The same key as a Bitcoin account is another kind of address, with its own counter.
    let btc = shop.svc.set_wallet("BTC", BIP84_ZPUB).expect("set BTC");
    assert_eq!(btc.next_index, 0);
}

#[test]
fn private_keys_wrong_networks_and_unknown_coins_are_refused_naming_the_field() {
    let shop = live();
    let xprv = "xprv9s21ZrQH143K3GJpoapnV8SFfukcVBSfeCficPSGfubmSFDxo1kuHnLisriDvSnRRuL2Qrg5ggqHKNVpxR86QEC8w35uxmGoggxtQTPvfUu";
    let error = shop.svc.set_wallet("BTC", xprv).expect_err("a private key");
    let message = error.to_string();
    assert!(matches!(error.kind(), ErrorKind::InvalidParameter { field, .. } if field == "wallet"), "{error:?}");
    assert!(message.contains("private key") && !message.contains(&xprv[4..40]), "{message}");
    let tpub = "tpubD6NzVbkrYhZ4XgiXtGrdW5XDAPFCL9h7we1vwNCpn8tGbBcgfVYjXyhWo4E1xkh56hjod1RhGjxbaTLV3X4FyWuejifB9jusQ46QzG87VKp";
    let error = shop.svc.set_wallet("BTC", tpub).expect_err("a testnet key in live");
    assert!(error.to_string().contains("wallet"), "{error}");
    let error = shop.svc.set_wallet("SOL", BIP84_ZPUB).expect_err("no SOL wallets");
    assert!(matches!(error.kind(), ErrorKind::InvalidParameter { field, .. } if field == "coin"), "{error:?}");
    assert!(shop.svc.wallets().expect("list").is_empty(), "nothing stored");
    let error = shop.svc.wallet_address("BTC", 0).expect_err("no wallet yet");
    assert!(error.to_string().contains("no wallet"), "{error}");
}

#[test]
fn a_host_address_source_still_gives_every_address() {
    #[derive(Debug)]
    struct HostWallet;
    impl coinorder::AddressSource for HostWallet {
        fn deposit_address(
            &self,
            _order_id: &str,
            _currency: &str,
            _amount: rust_decimal::Decimal,
        ) -> Result<coinorder::DepositAddress, String> {
            Ok(coinorder::DepositAddress { address: "bc1qhostwallet".into(), payment_uri: None })
        }
    }
    let shop = harness_with(Environment::Live, |config| config.address_source = Some(Arc::new(HostWallet)));
    shop.svc.set_rate("BTC", "USD", "50000".parse().expect("rate"), None).expect("rate");
    shop.svc.set_wallet("BTC", BIP84_ZPUB).expect("set wallet");
    let invoice = shop.svc.create_order(&merchant(&shop), &order_in("BTC", None)).expect("create").order.invoice;
    assert_eq!((invoice.address.as_str(), invoice.derivation_index), ("bc1qhostwallet", None));
}

#[test]
fn a_sandbox_wallet_derives_testnet_addresses() {
    let shop = harness_with(Environment::Sandbox, |_| {});
    let tpub = account_xpub(bitcoin::NetworkKind::Test, "m/84'/1'/0'");
    assert!(shop.svc.set_wallet("BTC", BIP84_ZPUB).is_err(), "mainnet keys are refused in the sandbox");
    shop.svc.set_wallet("BTC", &tpub).expect("set");
    let invoice = shop.svc.create_order(&merchant(&shop), &order_in("BTC", None)).expect("create").order.invoice;
    // BIP84's first testnet receive address of the same mnemonic.
    assert_eq!(invoice.address, "tb1q6rz28mcfaxtmd6v789l9rrlrusdprr9pqcpvkl");
    assert_eq!(invoice.derivation_index, Some(0));
}
