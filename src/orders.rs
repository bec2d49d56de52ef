//! Orders and invoices (spec §2, §4; DESIGN §4): the types, and every validation rule
//! for Create Order and Get Orders in one place.

use std::fmt;

use rust_decimal::Decimal;
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::money;
use crate::secrets::ShownUrl;
use crate::time::Timestamp;

/// Most characters in `title` (spec §8).
pub const TITLE_MAX_CHARS: usize = 200;
/// Most characters in `description` (spec §8).
pub const DESCRIPTION_MAX_CHARS: usize = 800;
/// Most characters in `merchant_order_id`.
pub const MERCHANT_ORDER_ID_MAX_CHARS: usize = 128;
/// Most characters in a URL field.
pub const URL_MAX_CHARS: usize = 2048;
/// Most characters in `customer_email`.
pub const EMAIL_MAX_CHARS: usize = 254;
/// Default page size of Get Orders (spec §4.3).
pub const LIST_DEFAULT_LIMIT: u32 = 10;
/// Largest page size of Get Orders (spec §4.3).
pub const LIST_MAX_LIMIT: u32 = 50;

/// The state of an order and of its invoice (DESIGN §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderStatus {
    /// Created, nothing paid yet.
    New,
    /// A payment was seen but does not yet cover the amount or is unconfirmed.
    Pending,
    /// Confirmed payments cover the invoice. Terminal.
    Paid,
    /// The invoice expired with no payment. Terminal.
    Expired,
    /// The invoice expired short, or a payment was rejected. Terminal.
    Failed,
    /// Cancelled by the customer or the merchant. Terminal.
    Cancelled,
}

impl OrderStatus {
    /// Every state, in lifecycle order.
    pub const ALL: [OrderStatus; 6] = [
        OrderStatus::New,
        OrderStatus::Pending,
        OrderStatus::Paid,
        OrderStatus::Expired,
        OrderStatus::Failed,
        OrderStatus::Cancelled,
    ];

    /// The wire name: `NEW`, `PENDING`, `PAID`, `EXPIRED`, `FAILED`, `CANCELLED`.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::New => "NEW",
            OrderStatus::Pending => "PENDING",
            OrderStatus::Paid => "PAID",
            OrderStatus::Expired => "EXPIRED",
            OrderStatus::Failed => "FAILED",
            OrderStatus::Cancelled => "CANCELLED",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        OrderStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// True for PAID, EXPIRED, FAILED and CANCELLED.
    pub fn is_terminal(self) -> bool {
        !matches!(self, OrderStatus::New | OrderStatus::Pending)
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Create Order request (spec §2.1), with the amount already an exact decimal.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CreateOrder {
    /// The merchant's own unique reference; generated (`ord_` + 24 base62) when absent.
    pub merchant_order_id: Option<String>,
    /// Upper-case ISO 4217 fiat code.
    pub currency: String,
    /// Amount in `currency`, exact.
    pub amount: Decimal,
    /// At most 200 characters.
    pub title: Option<String>,
    /// At most 800 characters.
    pub description: Option<String>,
    /// Where the customer's browser goes after paying or cancelling.
    pub callback_url: Option<String>,
    /// Where payment events for this order are sent.
    pub webhook_url: Option<String>,
    /// Optional page for a successful payment.
    pub success_url: Option<String>,
    /// Optional page for a cancelled payment.
    pub cancel_url: Option<String>,
    /// The payment link is also e-mailed here.
    pub customer_email: Option<String>,
    /// The crypto currency the customer pays in; the configured default when absent.
    pub pay_currency: Option<String>,
}

/// A Create Order request that passed every rule, normalized.
#[derive(Clone)]
pub(crate) struct ValidOrder {
    pub merchant_order_id: Option<String>,
    pub currency: String,
    pub amount: Decimal,
    pub title: Option<String>,
    pub description: Option<String>,
    pub callback_url: Option<String>,
    pub webhook_url: Option<String>,
    pub success_url: Option<String>,
    pub cancel_url: Option<String>,
    pub customer_email: Option<String>,
    pub pay_currency: String,
}

impl ValidOrder {
    /// A digest of everything the merchant sent, to tell an identical retry (replayed)
    /// from a different order reusing a `merchant_order_id` (refused).
    pub fn fingerprint(&self) -> Vec<u8> {
        let mut hasher = Sha256::new();
        let fields: [&str; 11] = [
            self.merchant_order_id.as_deref().unwrap_or(""),
            &self.currency,
            &self.amount.normalize().to_string(),
            self.title.as_deref().unwrap_or("\u{0}"),
            self.description.as_deref().unwrap_or("\u{0}"),
            self.callback_url.as_deref().unwrap_or("\u{0}"),
            self.webhook_url.as_deref().unwrap_or("\u{0}"),
            self.success_url.as_deref().unwrap_or("\u{0}"),
            self.cancel_url.as_deref().unwrap_or("\u{0}"),
            self.customer_email.as_deref().unwrap_or("\u{0}"),
            &self.pay_currency,
        ];
        for field in fields {
            hasher.update((field.len() as u64).to_le_bytes());
            hasher.update(field.as_bytes());
        }
        hasher.finalize().to_vec()
    }
}

impl CreateOrder {
    /// Applies every rule of DESIGN §4 and returns the normalized order.
    pub(crate) fn validate(&self, config: &Config) -> Result<ValidOrder> {
        let minor_units = money::fiat_minor_units("currency", &self.currency)?;
        let amount = money::check_fiat_amount("amount", self.amount, minor_units, &self.currency)?;
        let merchant_order_id = match &self.merchant_order_id {
            Some(id) => Some(check_merchant_order_id(id)?.to_string()),
            None => None,
        };
        let title = check_text("title", self.title.as_deref(), TITLE_MAX_CHARS)?;
        let description = check_text("description", self.description.as_deref(), DESCRIPTION_MAX_CHARS)?;
        let pay_currency = match self.pay_currency.as_deref() {
            None => config.default_pay_currency.clone(),
            Some(code) if config.pay_currencies.iter().any(|c| c == code) => code.to_string(),
            Some(code) => {
                return Err(Error::invalid(
                    "pay_currency",
                    format!("must be one of {}, got {code:?}", config.pay_currencies.join(", ")),
                ))
            }
        };
        Ok(ValidOrder {
            merchant_order_id,
            currency: self.currency.clone(),
            amount,
            title,
            description,
            callback_url: check_browser_url("callback_url", self.callback_url.as_deref())?,
            webhook_url: check_url("webhook_url", self.webhook_url.as_deref())?,
            success_url: check_browser_url("success_url", self.success_url.as_deref())?,
            cancel_url: check_browser_url("cancel_url", self.cancel_url.as_deref())?,
            customer_email: check_email("customer_email", self.customer_email.as_deref())?,
            pay_currency,
        })
    }

    /// The request as [`CreateOrder::validate`] would normalize it, with no rule applied:
    /// its fingerprint is that of an identical request accepted under looser rules.
    pub(crate) fn as_sent(&self, config: &Config) -> ValidOrder {
        ValidOrder {
            merchant_order_id: self.merchant_order_id.clone(),
            currency: self.currency.clone(),
            amount: self.amount.normalize(),
            title: self.title.clone(),
            description: self.description.clone(),
            callback_url: self.callback_url.clone(),
            webhook_url: self.webhook_url.clone(),
            success_url: self.success_url.clone(),
            cancel_url: self.cancel_url.clone(),
            customer_email: self.customer_email.clone(),
            pay_currency: self.pay_currency.clone().unwrap_or_else(|| config.default_pay_currency.clone()),
        }
    }
}

fn check_merchant_order_id(id: &str) -> Result<&str> {
    let chars = id.chars().count();
    if chars == 0 || chars > MERCHANT_ORDER_ID_MAX_CHARS {
        return Err(Error::invalid(
            "merchant_order_id",
            format!("must be 1 to {MERCHANT_ORDER_ID_MAX_CHARS} characters"),
        ));
    }
    if id.chars().any(|c| c.is_control() || c.is_whitespace() && c != ' ' || is_invisible_format_char(c)) {
        return Err(Error::invalid("merchant_order_id", "must contain only printable characters"));
    }
    // "cart-7 " would be another order than "cart-7", and "   " no reference at all:
    // both are slips in the merchant's code, refused rather than stored.
    if id.starts_with(' ') || id.ends_with(' ') {
        return Err(Error::invalid("merchant_order_id", "must not begin or end with a space"));
    }
    Ok(id)
}

/// Zero-width and direction-changing characters: they make two references that look the
/// same compare different.
fn is_invisible_format_char(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}')
}

fn check_text(field: &str, text: Option<&str>, max_chars: usize) -> Result<Option<String>> {
    match text {
        Some(text) if text.chars().count() > max_chars => {
            Err(Error::limit(field, format!("at most {max_chars} characters")))
        }
        // PostgreSQL's TEXT cannot hold U+0000: refused here, on every backend alike, so
        // that the same order is never accepted by one store and a 500 from the other.
        Some(text) if text.contains('\0') => Err(Error::invalid(field, "must not contain the NUL character (U+0000)")),
        other => Ok(other.map(str::to_string)),
    }
}

/// Where the payment page sends the customer's browser once the customer is done: only
/// a PAID or CANCELLED order redirects (`None` otherwise). The target is the order's
/// `callback_url` (spec §1, DESIGN §7); an order without one falls back to its
/// `success_url` (PAID) or `cancel_url` (CANCELLED). `order_id` and `status` are added to
/// the query: after the merchant's own parameters, kept as they were written; only when
/// the merchant's query already has an `order_id` or `status` is it rebuilt without them,
/// so that each appears once.
pub fn callback_redirect_url(order: &Order) -> Option<String> {
    let specific = match order.status {
        OrderStatus::Paid => order.success_url.as_deref(),
        OrderStatus::Cancelled => order.cancel_url.as_deref(),
        _ => return None,
    };
    let mut url = url::Url::parse(order.callback_url.as_deref().or(specific)?).ok()?;
    let ours = |name: &str| name == "order_id" || name == "status";
    if url.query_pairs().any(|(name, _)| ours(&name)) {
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(name, _)| !ours(name))
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    url.query_pairs_mut().append_pair("order_id", &order.order_id).append_pair("status", order.status.as_str());
    Some(url.to_string())
}

/// Checks an optional absolute http(s) URL of at most 2048 characters.
pub(crate) fn check_url(field: &str, text: Option<&str>) -> Result<Option<String>> {
    let Some(text) = text else { return Ok(None) };
    parsed_url(field, text)?;
    Ok(Some(text.to_string()))
}

/// [`check_url`] for a URL the customer's browser is sent to (`callback_url`,
/// `success_url`, `cancel_url`): the payment page shows it to anyone holding the order's
/// link, so it may not carry a user name or password.
fn check_browser_url(field: &str, text: Option<&str>) -> Result<Option<String>> {
    let Some(text) = text else { return Ok(None) };
    let url = parsed_url(field, text)?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::invalid(field, "must not carry a user name or password (the customer's browser sees it)"));
    }
    Ok(Some(text.to_string()))
}

/// `text` checked as [`check_url`] describes, parsed.
fn parsed_url(field: &str, text: &str) -> Result<url::Url> {
    if text.chars().count() > URL_MAX_CHARS {
        return Err(Error::invalid(field, format!("at most {URL_MAX_CHARS} characters")));
    }
    // The URL parser would drop tabs and line breaks and encode other control characters,
    // so the text kept (and redirected or posted to) would not be the URL it checked; and
    // PostgreSQL's TEXT cannot hold U+0000 at all.
    if text.chars().any(char::is_control) {
        return Err(Error::invalid(field, "must not contain control characters"));
    }
    // The parser drops spaces at either end; kept, they would go out with the URL.
    if text.trim() != text {
        return Err(Error::invalid(field, "must not begin or end with spaces"));
    }
    let parsed =
        url::Url::parse(text).map_err(|e| Error::invalid(field, format!("must be an absolute http(s) URL ({e})")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::invalid(field, "must be an absolute http(s) URL"));
    }
    // The parser mends `https:///x`, `http:shop.example` and backslashes into another URL
    // than the text reads as; the text is what is kept and shown, so it must be the URL
    // it goes to: `scheme://host…`, with no backslash.
    let after_scheme = text.get(parsed.scheme().len()..).unwrap_or_default();
    if !after_scheme.starts_with("://") || after_scheme[3..].starts_with('/') || text.contains('\\') {
        return Err(Error::invalid(field, "must be an absolute http(s) URL written as scheme://host/…"));
    }
    // No server listens on port 0; a webhook there would be retried for days, never sent.
    if parsed.port() == Some(0) {
        return Err(Error::invalid(field, "must not use port 0"));
    }
    Ok(parsed)
}

fn check_email(field: &str, text: Option<&str>) -> Result<Option<String>> {
    let Some(text) = text else { return Ok(None) };
    if text.chars().count() > EMAIL_MAX_CHARS {
        return Err(Error::invalid(field, format!("at most {EMAIL_MAX_CHARS} characters")));
    }
    let options = email_address::Options::default().without_display_text().with_required_tld();
    let address = email_address::EmailAddress::parse_with_options(text, options)
        .map_err(|_| Error::invalid(field, "must be a valid e-mail address"))?;
    // An IP-literal domain ("a@[127.0.0.1]") is valid RFC 5321 but no mailer delivers it.
    if address.domain().starts_with('[') {
        return Err(Error::invalid(field, "must be a valid e-mail address with a domain name"));
    }
    // One the mailer cannot send to would be retried for days and never sent: refused
    // here, where the caller hears.
    if !is_sendable_address(text) {
        return Err(Error::invalid(field, "must be an e-mail address of the common form, without quotes"));
    }
    Ok(Some(text.to_string()))
}

/// Whether the SMTP client the payment-link e-mail goes out with takes `address` as a
/// recipient. It does not take every address RFC 5322 allows: a quoted local part
/// (`"a b"@example.com`) is refused.
pub(crate) fn is_sendable_address(address: &str) -> bool {
    address.parse::<lettre::message::Mailbox>().is_ok()
}

/// A stored order (spec §2.2, §2.3, §2.5).
#[derive(Clone, PartialEq, Eq)]
pub struct Order {
    /// Service-assigned UUID.
    pub order_id: String,
    /// Merchant account id.
    pub user_id: i64,
    /// Sandbox or live.
    pub environment: Environment,
    /// The key that created the order (its webhook URL is the fallback target).
    pub key_id: String,
    /// The merchant's or the generated reference.
    pub merchant_order_id: String,
    /// As sent.
    pub title: Option<String>,
    /// As sent.
    pub description: Option<String>,
    /// As sent.
    pub callback_url: Option<String>,
    /// As sent.
    pub webhook_url: Option<String>,
    /// As sent.
    pub success_url: Option<String>,
    /// As sent.
    pub cancel_url: Option<String>,
    /// As sent.
    pub customer_email: Option<String>,
    /// Fiat amount, exact.
    pub amount: Decimal,
    /// Fiat currency code.
    pub currency: String,
    /// Empty until a payment is seen, then the fiat code.
    pub receive_currency: String,
    /// Current state.
    pub status: OrderStatus,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Deletion flag (always false today; kept for the spec's `deleted` member).
    pub deleted: bool,
    /// True once the merchant accepted a late or short payment with `mark_paid`.
    pub marked_paid: bool,
}

impl fmt::Debug for CreateOrder {
    // The webhook URL may carry credentials, as on `Order`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreateOrder")
            .field("merchant_order_id", &self.merchant_order_id)
            .field("currency", &self.currency)
            .field("amount", &self.amount)
            .field("title", &self.title)
            .field("description", &self.description)
            .field("callback_url", &self.callback_url)
            .field("webhook_url", &ShownUrl(&self.webhook_url))
            .field("success_url", &self.success_url)
            .field("cancel_url", &self.cancel_url)
            .field("customer_email", &self.customer_email)
            .field("pay_currency", &self.pay_currency)
            .finish()
    }
}

impl fmt::Debug for CreatedOrder {
    // The stored 201 body holds the webhook URL as sent, credentials included; the
    // order shows it redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatedOrder")
            .field("order", &self.order)
            .field("payment_url", &self.payment_url)
            .field("replayed", &self.replayed)
            .field("response_body", &format_args!("<{} bytes>", self.response_body.len()))
            .finish()
    }
}

impl fmt::Debug for Order {
    // The webhook URL may carry credentials (`https://user:pass@…`, `?token=…`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Order")
            .field("order_id", &self.order_id)
            .field("user_id", &self.user_id)
            .field("environment", &self.environment)
            .field("key_id", &self.key_id)
            .field("merchant_order_id", &self.merchant_order_id)
            .field("title", &self.title)
            .field("description", &self.description)
            .field("callback_url", &self.callback_url)
            .field("webhook_url", &ShownUrl(&self.webhook_url))
            .field("success_url", &self.success_url)
            .field("cancel_url", &self.cancel_url)
            .field("customer_email", &self.customer_email)
            .field("amount", &self.amount)
            .field("currency", &self.currency)
            .field("receive_currency", &self.receive_currency)
            .field("status", &self.status)
            .field("created_at", &self.created_at)
            .field("updated_at", &self.updated_at)
            .field("deleted", &self.deleted)
            .field("marked_paid", &self.marked_paid)
            .finish()
    }
}

/// An order's invoice: the crypto quote (spec §2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoice {
    /// Invoice UUID.
    pub invoice_id: String,
    /// The owning order.
    pub order_id: String,
    /// The owning order's merchant reference.
    pub merchant_order_id: String,
    /// Crypto amount to pay, rounded up to the coin's decimals.
    pub amount: Decimal,
    /// Crypto currency code.
    pub currency: String,
    /// The quoted rate, fiat per coin.
    pub rate: Decimal,
    /// Invoice state.
    pub status: OrderStatus,
    /// Amount received so far, in the fiat currency.
    pub receive_amount: Decimal,
    /// Empty until a payment is seen, then the fiat code.
    pub receive_currency: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// When the quote expires.
    pub expired_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Where the customer sends the coins.
    pub address: String,
    /// The payment URI shown as a QR code (`bitcoin:<address>?amount=...`).
    pub payment_uri: String,
    /// The index in the merchant's watch-only wallet the address was derived at
    /// (`Service::set_wallet`); `None` when the address came from elsewhere (an
    /// `AddressSource`, the sandbox's fake addresses) or there is none.
    pub derivation_index: Option<u32>,
}

/// An order with its invoice, as Get Order returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderWithInvoice {
    /// The order.
    pub order: Order,
    /// Its invoice.
    pub invoice: Invoice,
}

/// The result of Create Order.
#[derive(Clone, PartialEq, Eq)]
pub struct CreatedOrder {
    /// The order and its invoice, as they are now: on a replay, in whatever state the
    /// order has reached since it was created.
    pub order: OrderWithInvoice,
    /// The hosted payment page link (`?id=<order_id>`).
    pub payment_url: String,
    /// True when this was an identical retry of an earlier request: nothing new was
    /// created, and `response_body` is the original 201 body, byte for byte.
    pub replayed: bool,
    /// The exact JSON body of the original 201 response (what a replay returns).
    pub response_body: String,
}

/// Get Orders query (spec §4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOrders {
    /// Only orders in this state; all when `None`.
    pub status: Option<OrderStatus>,
    /// Page size, 1 to 50.
    pub limit: u32,
    /// Index of the first order returned.
    pub offset: u64,
}

impl Default for ListOrders {
    fn default() -> Self {
        ListOrders { status: None, limit: LIST_DEFAULT_LIMIT, offset: 0 }
    }
}

impl ListOrders {
    /// Checks the limit (1..=50; above 50 is `API_LIMIT_EXCEEDED`).
    pub(crate) fn validate(&self) -> Result<()> {
        if self.limit == 0 {
            return Err(Error::invalid("limit", format!("must be an integer from 1 to {LIST_MAX_LIMIT}")));
        }
        if self.limit > LIST_MAX_LIMIT {
            return Err(Error::limit("limit", format!("at most {LIST_MAX_LIMIT}")));
        }
        if i64::try_from(self.offset).is_err() {
            return Err(Error::invalid("offset", format!("must be an integer from 0 to {}", i64::MAX)));
        }
        Ok(())
    }
}

/// Most orders one [`HostOrderQuery`] returns.
pub const HOST_LIST_MAX_LIMIT: u32 = 1_000;

/// What the host lists across merchants ([`crate::Service::host_orders`], the CLI's
/// `orders list`): every filter is optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOrderQuery {
    /// Only orders in this state.
    pub status: Option<OrderStatus>,
    /// Only this merchant's orders.
    pub user_id: Option<i64>,
    /// Only orders created at or after this time.
    pub since: Option<Timestamp>,
    /// Most orders returned, 1 to [`HOST_LIST_MAX_LIMIT`].
    pub limit: u32,
}

impl Default for HostOrderQuery {
    fn default() -> Self {
        HostOrderQuery { status: None, user_id: None, since: None, limit: LIST_DEFAULT_LIMIT }
    }
}

/// One page of Get Orders, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderPage {
    /// The orders on this page.
    pub orders: Vec<Order>,
    /// The page size asked for.
    pub limit: u32,
    /// The offset asked for.
    pub offset: u64,
    /// True when more orders follow this page.
    pub has_more: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_as_sent_has_the_fingerprint_of_its_validated_form() {
        // The replay of a create accepted under looser rules compares `as_sent`'s
        // fingerprint with the stored one, which `validate` made: they must agree on
        // every request both accept, whatever `validate` normalizes.
        let config = Config::new(Environment::Sandbox);
        let full = CreateOrder {
            merchant_order_id: Some("cart-1".into()),
            currency: "EUR".into(),
            amount: "10.500".parse().unwrap_or_default(),
            title: Some("Tea".into()),
            description: Some("".into()),
            callback_url: Some("https://shop.example/back?x=1".into()),
            webhook_url: Some("https://shop.example/hook".into()),
            success_url: Some("https://shop.example/ok".into()),
            cancel_url: Some("https://shop.example/no".into()),
            customer_email: Some("buyer@shop.example".into()),
            pay_currency: Some("BTC".into()),
        };
        let minimal = CreateOrder { currency: "USD".into(), amount: Decimal::ONE_HUNDRED, ..Default::default() };
        for request in [full, minimal] {
            let valid = request.validate(&config).map(|valid| valid.fingerprint()).ok();
            assert_eq!(valid, Some(request.as_sent(&config).fingerprint()), "{request:?}");
        }
    }

    fn order(status: OrderStatus, callback: Option<&str>, success: Option<&str>, cancel: Option<&str>) -> Order {
        Order {
            order_id: "0f0e0d0c-0000-4000-8000-000000000001".into(),
            user_id: 1,
            environment: Environment::Sandbox,
            key_id: "key_x".into(),
            merchant_order_id: "m-1".into(),
            title: None,
            description: None,
            callback_url: callback.map(str::to_string),
            webhook_url: None,
            success_url: success.map(str::to_string),
            cancel_url: cancel.map(str::to_string),
            customer_email: None,
            amount: Decimal::ONE,
            currency: "USD".into(),
            receive_currency: String::new(),
            status,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            deleted: false,
            marked_paid: false,
        }
    }

    #[test]
    fn the_redirect_goes_to_the_callback_url_else_success_or_cancel_and_sets_each_parameter_once() {
        let id = "0f0e0d0c-0000-4000-8000-000000000001";
        let paid = order(OrderStatus::Paid, Some("https://shop.example/cb?ref=7&status=X&order_id=Y"), None, None);
        assert_eq!(
            callback_redirect_url(&paid).as_deref(),
            Some(format!("https://shop.example/cb?ref=7&order_id={id}&status=PAID").as_str())
        );
        // Without parameters of ours in it, the merchant's query stays as written.
        let kept = order(OrderStatus::Cancelled, Some("https://shop.example/cb/x?a=1&b=x%20y#top"), None, None);
        assert_eq!(
            callback_redirect_url(&kept).as_deref(),
            Some(format!("https://shop.example/cb/x?a=1&b=x%20y&order_id={id}&status=CANCELLED#top").as_str())
        );
        let all = |status| {
            order(status, Some("https://a.example/cb"), Some("https://a.example/ok"), Some("https://a.example/no"))
        };
        for status in [OrderStatus::Paid, OrderStatus::Cancelled] {
            assert!(callback_redirect_url(&all(status)).unwrap_or_default().starts_with("https://a.example/cb?"));
        }
        let no_callback = |status| order(status, None, Some("https://a.example/ok"), Some("https://a.example/no"));
        assert!(callback_redirect_url(&no_callback(OrderStatus::Paid))
            .unwrap_or_default()
            .starts_with("https://a.example/ok?"));
        assert!(callback_redirect_url(&no_callback(OrderStatus::Cancelled))
            .unwrap_or_default()
            .starts_with("https://a.example/no?"));
        assert_eq!(callback_redirect_url(&order(OrderStatus::Paid, None, None, Some("https://a.example/no"))), None);
        for status in [OrderStatus::New, OrderStatus::Pending, OrderStatus::Expired, OrderStatus::Failed] {
            assert_eq!(callback_redirect_url(&all(status)), None, "{status}");
        }
    }

    #[test]
    fn merchant_order_id_must_be_printable() {
        assert!(check_merchant_order_id("cart 1001/ü").is_ok());
        for bad in ["", "a\tb", "a\u{7}b", "a\u{200B}b", "\u{FEFF}a", "a\u{202E}b"] {
            assert!(check_merchant_order_id(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_merchant_order_id(&"x".repeat(128)).is_ok());
        for padded in [" ", "   ", " cart-7", "cart-7 "] {
            let refused = check_merchant_order_id(padded).expect_err(padded);
            assert_eq!(refused.to_string(), "merchant_order_id: must not begin or end with a space", "{padded:?}");
        }
        assert!(check_merchant_order_id(&"x".repeat(129)).is_err());
    }
}
