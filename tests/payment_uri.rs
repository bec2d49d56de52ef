//! Payment URIs of real invoices, through the public API: sandbox orders created with
//! `POST /v1/orders` in every pay currency, their `invoice.payment_uri` checked against
//! BIP-21 (bitcoin, litecoin) and EIP-681 (ether in wei, ERC-20 `transfer` calls in the
//! token's base units, on the Sepolia test network in the sandbox), and the payment page's
//! "Open in wallet" link.

#[path = "common/backend.rs"]
mod backend;

use coinorder::money::{coin_decimals, Decimal};
use coinorder::{Config, Environment, Invoice, NewApiKey, Service, WireRequest};
use serde_json::{json, Value};

const USDT_CONTRACT: &str = "0xdAC17F958D2ee523a2206206994597C13D831ec7";
/// Circle's USDC on Sepolia, the sandbox's chain (mainnet: 0xA0b8…eB48).
const USDC_CONTRACT: &str = "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238";

/// A sandbox service over a fresh file accepting every coin, and a key for it.
struct Shop {
    _dir: tempfile::TempDir,
    service: Service,
    key: String,
}

impl Shop {
    fn open() -> Shop {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::new(Environment::Sandbox);
        config.pay_currencies = ["USDT", "USDC", "ETH", "BTC", "LTC"].iter().map(|c| c.to_string()).collect();
        config.secret_key_path = backend::shared_key_file();
        let service = Service::open(backend::db_in(dir.path()), config).expect("open service");
        let created = service
            .create_key(NewApiKey { user_id: 1, environment: Environment::Sandbox, webhook_url: None })
            .expect("create key");
        let key = created.plain_key.expose().to_string();
        Shop { _dir: dir, service, key }
    }

    /// Creates an order through the HTTP API and returns its invoice as stored.
    fn invoice(&self, body: Value) -> Invoice {
        let response = self.service.handle(
            &WireRequest::new("POST", "/v1/orders")
                .header("x-api-key", &self.key)
                .header("content-type", "application/json")
                .body(body.to_string()),
        );
        let created = response.json();
        assert_eq!(response.status, 201, "{body} -> {created}");
        let order_id = created["data"]["order_id"].as_str().expect("order_id");
        let current = self.service.order(order_id).expect("order");
        assert_eq!(current.invoice.currency, body["pay_currency"].as_str().unwrap_or("USDT"));
        current.invoice
    }

    /// The payment page's HTML for an order.
    fn page(&self, order_id: &str) -> String {
        let response = self.service.handle(&WireRequest::new("GET", &format!("/pay?id={order_id}")));
        assert_eq!(response.status, 200);
        String::from_utf8(response.body).expect("UTF-8 page")
    }
}

/// `amount × 10^decimals` by exact decimal arithmetic; it must be a whole number.
fn base_units(amount: Decimal, currency: &str) -> String {
    let decimals = coin_decimals(currency).expect("known coin");
    let scale = Decimal::from_i128_with_scale(10_i128.pow(decimals), 0);
    let units = amount.checked_mul(scale).expect("fits a Decimal").normalize();
    assert_eq!(units.scale(), 0, "{amount} {currency} is not a whole number of base units");
    units.to_string()
}

/// The value of query parameter `name` in `uri`.
fn param<'a>(uri: &'a str, name: &str) -> Option<&'a str> {
    let (_, query) = uri.split_once('?')?;
    query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

#[test]
fn tokens_are_erc20_transfers_in_base_units() {
    let shop = Shop::open();
    for (currency, contract) in [("USDT", USDT_CONTRACT), ("USDC", USDC_CONTRACT)] {
        // 19.99 USD at 1 USD per token: 19.99 tokens, 19 990 000 base units (6 decimals).
        let invoice = shop.invoice(json!({"currency": "USD", "amount": "19.99", "pay_currency": currency}));
        assert_eq!(invoice.amount, "19.99".parse::<Decimal>().expect("decimal"));
        assert!(invoice.address.starts_with("0x") && invoice.address.len() == 42, "{}", invoice.address);
        assert_eq!(
            invoice.payment_uri,
            format!("ethereum:{contract}@11155111/transfer?address={}&uint256=19990000", invoice.address)
        );
        assert_eq!(param(&invoice.payment_uri, "uint256"), Some(base_units(invoice.amount, currency).as_str()));
        // Never the ether-denominated form wallets would pay in ETH.
        assert!(param(&invoice.payment_uri, "amount").is_none() && param(&invoice.payment_uri, "value").is_none());

        // A quote with all six decimals in use (EUR at the sandbox's 0.9 per USD).
        let invoice = shop.invoice(json!({"currency": "EUR", "amount": "10", "pay_currency": currency}));
        assert_eq!(invoice.amount.scale(), 6, "{}", invoice.amount);
        let units = base_units(invoice.amount, currency);
        assert_eq!(
            invoice.payment_uri,
            format!("ethereum:{contract}@11155111/transfer?address={}&uint256={units}", invoice.address)
        );
        assert_eq!(units, "11111112", "10 EUR / 0.9 = 11.111112 tokens, rounded up");
    }
}

#[test]
fn ether_is_requested_in_wei() {
    let shop = Shop::open();
    // A rate that uses all 18 decimals of ether.
    shop.service.set_rate("ETH", "USD", "3001.07".parse().expect("rate"), None).expect("set rate");
    let invoice = shop.invoice(json!({"currency": "USD", "amount": "19.99", "pay_currency": "ETH"}));
    assert_eq!(invoice.amount.scale(), 18, "{}", invoice.amount);
    let wei = base_units(invoice.amount, "ETH");
    assert_eq!(invoice.payment_uri, format!("ethereum:{}@11155111?value={wei}", invoice.address));
    assert!(wei.bytes().all(|b| b.is_ascii_digit()), "{wei}");

    // A round amount: 2 ETH is 2 × 10^18 wei, written out in full.
    shop.service.set_rate("ETH", "USD", "1000".parse().expect("rate"), None).expect("set rate");
    let invoice = shop.invoice(json!({"currency": "USD", "amount": 2000, "pay_currency": "ETH"}));
    assert_eq!(invoice.payment_uri, format!("ethereum:{}@11155111?value=2000000000000000000", invoice.address));
}

#[test]
fn bitcoin_and_litecoin_keep_bip21() {
    let shop = Shop::open();
    // 19.99 USD at the sandbox's 10 000 USD per BTC.
    let invoice = shop.invoice(json!({"currency": "USD", "amount": "19.99", "pay_currency": "BTC"}));
    assert_eq!(invoice.payment_uri, format!("bitcoin:{}?amount=0.001999", invoice.address));
    assert!(invoice.address.starts_with("tb1q"), "{}", invoice.address);
    // 19.99 USD at 100 USD per LTC.
    let invoice = shop.invoice(json!({"currency": "USD", "amount": "19.99", "pay_currency": "LTC"}));
    assert_eq!(invoice.payment_uri, format!("litecoin:{}?amount=0.1999", invoice.address));
    assert_eq!(param(&invoice.payment_uri, "amount"), Some(invoice.amount.normalize().to_string().as_str()));
}

#[test]
fn the_payment_page_links_the_token_uri_to_the_wallet() {
    let shop = Shop::open();
    let invoice = shop.invoice(json!({"currency": "USD", "amount": "5", "pay_currency": "USDT"}));
    let page = shop.page(&invoice.order_id);
    // The link is the URI itself, with `&` escaped for HTML.
    let href = format!("href=\"{}\"", invoice.payment_uri.replace('&', "&amp;"));
    assert!(page.contains(&href), "no wallet link {href} in the page");
    assert!(page.contains("Open in wallet"));
    // The public status carries the same URI.
    let status = shop.service.handle(&WireRequest::new("GET", &format!("/pay/status?id={}", invoice.order_id)));
    assert_eq!(status.json()["payment_uri"], json!(invoice.payment_uri));
}
