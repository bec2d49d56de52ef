//! The hosted payment page (`/pay?id=<order_id>`) and its public JSON.
//!
//! The page is one self-contained HTML document: inline CSS and script, the QR code as
//! inline SVG rendered here, no external assets (it works offline and under a strict
//! content security policy). Everything is rendered server-side from the same public
//! fields `/pay/status` returns, so the page reads correctly without JavaScript, and its
//! buttons are then plain forms (answered by a redirect back to the page); the script
//! adds the live countdown, polls `/pay/status`, drives the buttons and follows
//! `redirect_url` once the order is PAID or CANCELLED.

use chrono::{DateTime, Datelike, Timelike};
use qrcode::render::svg;
use qrcode::{EcLevel, QrCode};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::addresses::payment_uri_for;
use crate::environment::Environment;
use crate::error::Error;
use crate::lifecycle::EventType;
use crate::money::{fiat_text, to_json_number};
use crate::orders::{callback_redirect_url, Invoice, Order, OrderWithInvoice};
use crate::payments::{Payment, PaymentState};
use crate::service::Service;
use crate::time::Timestamp;
use crate::OrderStatus;

/// How long a PAID page shows its receipt before it follows `redirect_url`: long enough
/// to see that the payment went through, short enough not to strand the customer.
const PAID_REDIRECT_DELAY_MS: u64 = 4_000;

/// The network a customer must send `currency` on in `environment`, as the page names it
/// (`""` for a coin the page does not know). The sandbox names the test networks its
/// fake addresses and payment URIs belong to, so nobody mistakes them for real ones.
pub(crate) fn network_name(environment: Environment, currency: &str) -> &'static str {
    match (environment, currency) {
        (Environment::Live, "BTC") => "Bitcoin",
        (Environment::Sandbox, "BTC") => "Bitcoin testnet",
        (Environment::Live, "ETH") => "Ethereum mainnet",
        (Environment::Sandbox, "ETH") => "Sepolia test network",
        (Environment::Live, "USDT" | "USDC") => "Ethereum mainnet (ERC-20)",
        (Environment::Sandbox, "USDT" | "USDC") => "Sepolia test network (ERC-20)",
        (Environment::Live, "LTC") => "Litecoin",
        (Environment::Sandbox, "LTC") => "Litecoin testnet",
        (Environment::Live, "TRX") => "TRON",
        (Environment::Sandbox, "TRX") => "TRON test network",
        (Environment::Live, "SOL") => "Solana",
        (Environment::Sandbox, "SOL") => "Solana test network",
        _ => "",
    }
}

/// The payment URI for what is still `due` on `invoice`: what the QR code, the wallet
/// link and the copied amount ask for. The invoice's own URI while nothing has arrived;
/// after a partial payment the same URI built for the remainder. `""` when no URI can
/// ask for the remainder: nothing is due, there is no address, or the host's address
/// source wrote its own URI, whose format only the host knows (showing it would ask
/// for the full amount again).
fn due_payment_uri(environment: Environment, invoice: &Invoice, due: Decimal) -> String {
    if due == invoice.amount {
        return invoice.payment_uri.clone();
    }
    if due <= Decimal::ZERO || invoice.address.is_empty() {
        return String::new();
    }
    let standard = payment_uri_for(environment, &invoice.currency, &invoice.address, invoice.amount);
    if standard != invoice.payment_uri {
        return String::new();
    }
    payment_uri_for(environment, &invoice.currency, &invoice.address, due)
}

/// What a PAID order's receipt shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Receipt {
    /// Everything confirmed, in the invoice's coin (more than the invoice if overpaid).
    amount: Decimal,
    /// The invoice's coin.
    currency: String,
    /// When the order became PAID.
    paid_at: Timestamp,
    /// The confirmed payments: (txid, amount).
    payments: Vec<(String, Decimal)>,
}

/// The receipt of a PAID order from its payments and the time of its last `order.paid`
/// event. Only confirmed payments are money the merchant has; a late one that confirmed
/// counts too, since it is what a `mark_paid` accepted.
fn receipt_of(currency: &str, payments: &[Payment], paid_at: Timestamp) -> Receipt {
    let confirmed: Vec<(String, Decimal)> = payments
        .iter()
        .filter(|p| p.state == PaymentState::Confirmed)
        .map(|p| (p.txid.clone(), p.amount.normalize()))
        .collect();
    let amount = confirmed.iter().fold(Decimal::ZERO, |sum, (_, amount)| sum.saturating_add(*amount)).normalize();
    Receipt { amount, currency: currency.to_string(), paid_at, payments: confirmed }
}

/// A time for people, in UTC (`2026-11-22 05:51 UTC`): the same for every customer and
/// with or without the script.
fn time_text(at: Timestamp) -> String {
    match DateTime::from_timestamp_millis(at.as_millis()) {
        Some(dt) => {
            format!("{:04}-{:02}-{:02} {:02}:{:02} UTC", dt.year(), dt.month(), dt.day(), dt.hour(), dt.minute())
        }
        None => at.to_iso(),
    }
}

/// Where "Back to the shop" leads on a PAID order: its `success_url`, else its
/// `callback_url`, with `order_id` and `status` in the query as in `redirect_url`.
fn shop_return_url(order: &Order) -> Option<String> {
    if order.status != OrderStatus::Paid {
        return None;
    }
    // callback_redirect_url already sets the query the merchant expects; it prefers the
    // callback_url, so hide that from it when there is a success_url.
    let mut preferred = order.clone();
    if preferred.success_url.is_some() {
        preferred.callback_url = None;
    }
    callback_redirect_url(&preferred)
}

/// Everything the page and `/pay/status` derive from the order beyond its own fields.
struct Facts {
    /// What is still due; `None` if the payments cannot be read.
    due: Option<Decimal>,
    /// See [`due_payment_uri`].
    due_uri: String,
    /// See [`network_name`].
    network: &'static str,
    /// Only for a PAID order whose payments can be read.
    receipt: Option<Receipt>,
    /// See [`shop_return_url`].
    return_url: Option<String>,
    /// The display name of the order's key (`keys set-name`), if it has one.
    merchant_name: Option<String>,
}

impl Facts {
    fn of(service: &Service, current: &OrderWithInvoice) -> Facts {
        let (order, invoice) = (&current.order, &current.invoice);
        let due = service.amount_due(&order.order_id).ok();
        let due_uri = due_payment_uri(order.environment, invoice, due.unwrap_or(invoice.amount));
        let receipt = (order.status == OrderStatus::Paid)
            .then(|| service.order_payments(&order.order_id).ok())
            .flatten()
            .map(|payments| {
                let paid_event = service.order_events(&order.order_id).ok().and_then(|events| {
                    events.iter().rev().find(|e| e.event_type == EventType::Paid).map(|e| e.created_at)
                });
                receipt_of(&invoice.currency, &payments, paid_event.unwrap_or(order.updated_at))
            });
        Facts {
            due,
            due_uri,
            network: network_name(order.environment, &invoice.currency),
            receipt,
            return_url: shop_return_url(order),
            merchant_name: service.get_key(&order.key_id).ok().and_then(|key| key.display_name),
        }
    }
}

/// What the payment page may show about an order: no merchant ids, e-mails or webhook
/// URLs. `redirect_url` is set once the order is PAID or CANCELLED and has somewhere to go
/// back to: its callback_url, else its success_url (PAID) or cancel_url (CANCELLED).
/// `due_amount` is the crypto amount still to send (the invoice amount less the payments
/// that count and are not rejected; `null` if the payments cannot be read) and
/// `due_payment_uri` the payment URI asking for it. A PAID order adds its `receipt`
/// (crypto amounts as exact decimal strings) and `return_url`, the "Back to the shop"
/// link (its success_url, else its callback_url).
pub fn public_status(service: &Service, current: &OrderWithInvoice) -> Value {
    status_json(service, current, &Facts::of(service, current))
}

fn status_json(service: &Service, current: &OrderWithInvoice, facts: &Facts) -> Value {
    let (order, invoice) = (&current.order, &current.invoice);
    let redirect = callback_redirect_url(order);
    // Receipt amounts are exact decimal strings: the script only shows them, and a JSON
    // number would reach it as a double.
    let receipt = facts.receipt.as_ref().map(|receipt| {
        let payments: Vec<Value> =
            receipt.payments.iter().map(|(txid, amount)| json!({"txid": txid, "amount": amount.to_string()})).collect();
        json!({
            "amount": receipt.amount.to_string(),
            "currency": receipt.currency,
            "paid_at": receipt.paid_at.to_iso(),
            "paid_at_t": receipt.paid_at.as_millis(),
            "paid_at_text": time_text(receipt.paid_at),
            "payments": payments,
        })
    });
    let receive_currency =
        if invoice.receive_currency.is_empty() { &order.currency } else { &invoice.receive_currency };
    json!({
        "order_id": order.order_id,
        "merchant_name": facts.merchant_name,
        "title": order.title,
        "description": order.description,
        "status": order.status.as_str(),
        "price_amount": to_json_number(order.amount),
        "price_currency": order.currency,
        "price_text": fiat_text(order.amount, &order.currency),
        "pay_amount": to_json_number(invoice.amount),
        "pay_currency": invoice.currency,
        "network": facts.network,
        "due_amount": facts.due.map(to_json_number),
        "due_payment_uri": facts.due_uri,
        "address": invoice.address,
        "payment_uri": invoice.payment_uri,
        "receive_amount": to_json_number(invoice.receive_amount),
        "receive_currency": invoice.receive_currency,
        "receive_text": fiat_text(invoice.receive_amount, receive_currency),
        "expired_at": invoice.expired_at.to_iso(),
        "expired_at_t": invoice.expired_at.as_millis(),
        "now_t": service.now().as_millis(),
        "sandbox": order.environment == Environment::Sandbox,
        "redirect_url": redirect,
        "receipt": receipt,
        "return_url": facts.return_url,
    })
}

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// JSON made safe to sit inside a `<script>` element: `<`, `>` and `&` only occur inside
/// JSON strings, where their `\u` escapes mean the same, so no `</script>` or `<!--` can
/// end or confuse the element.
fn script_json(value: &Value) -> String {
    value.to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// What the page says about each state: (status, badge, explanation).
const STATUS_TEXT: &[(&str, &str, &str)] = &[
    ("NEW", "Awaiting payment", "Send the exact amount to the address below before the timer runs out."),
    ("PENDING", "Payment detected", "We have seen your payment and are waiting for the network to confirm it."),
    ("PAID", "Paid \u{2713}", "Thank you! Your payment has been received."),
    ("EXPIRED", "Expired", "The time to pay this invoice ran out. Please place a new order with the merchant."),
    (
        "FAILED",
        "Failed",
        "The payment did not cover the invoice in time. Please contact the merchant about any amount sent.",
    ),
    ("CANCELLED", "Cancelled", "This payment was cancelled."),
];

/// A PENDING order with part of the amount still due.
const PARTLY_PAID: (&str, &str) =
    ("Partly paid", "Part of the amount has arrived. Send the rest to the same address before the timer runs out.");

/// What an EXPIRED page tells a customer whose coins are already on their way: sending
/// again would pay twice, and a late payment is recorded for the merchant to accept.
const EXPIRED_HELP: &str = "Already sent the coins? Please do not send them again. Contact the merchant with your \
     transaction ID (txid) and the order number below: a payment that arrives after the time ran out is still \
     recorded, and the merchant can accept it.";

fn status_text(status: OrderStatus) -> (&'static str, &'static str) {
    STATUS_TEXT
        .iter()
        .find(|(name, _, _)| *name == status.as_str())
        .map_or(("", ""), |(_, badge, detail)| (*badge, *detail))
}

/// `mm:ss` (or `h:mm:ss`) left until `expired_at_ms`.
fn countdown_text(left_ms: i64) -> String {
    let seconds = left_ms.max(0) / 1000;
    let (hours, minutes, seconds) = (seconds / 3600, (seconds % 3600) / 60, seconds % 60);
    if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes:02}:{seconds:02}")
    }
}

/// The payment URI as an inline SVG QR code, or `None` when there is nothing to encode.
fn qr_svg(data: &str) -> Option<String> {
    if data.is_empty() {
        return None;
    }
    let code = QrCode::with_error_correction_level(data.as_bytes(), EcLevel::M).ok()?;
    let image = code
        .render::<svg::Color>()
        .quiet_zone(true)
        .module_dimensions(1, 1)
        .dark_color(svg::Color("#0f172a"))
        .light_color(svg::Color("#ffffff"))
        .build();
    // Drop the XML prolog: the SVG is inlined into HTML.
    let start = image.find("<svg")?;
    Some(image[start..].replacen(
        "<svg ",
        "<svg id=\"qr-svg\" data-testid=\"qr-svg\" role=\"img\" aria-label=\"QR code of the payment request\" ",
        1,
    ))
}

/// Wallet links only for the URI schemes wallets register (never `javascript:` and the like).
fn wallet_link(payment_uri: &str) -> Option<String> {
    const SCHEMES: &[&str] = &["bitcoin:", "litecoin:", "ethereum:", "solana:", "tron:"];
    SCHEMES.iter().any(|scheme| payment_uri.starts_with(scheme)).then(|| {
        format!(
            "<a class=\"wallet-link\" id=\"open-wallet\" data-testid=\"open-wallet\" href=\"{}\">Open in wallet</a>",
            escape_html(payment_uri)
        )
    })
}

/// The receipt's `<dl>`: amount, time and transaction ids.
fn receipt_html(receipt: Option<&Receipt>) -> String {
    let (amount, currency, iso, when, txids) = match receipt {
        Some(r) => (
            r.amount.to_string(),
            r.currency.as_str(),
            r.paid_at.to_iso(),
            time_text(r.paid_at),
            r.payments.iter().map(|(txid, _)| txid.as_str()).collect::<Vec<_>>(),
        ),
        None => (String::new(), "", String::new(), String::new(), Vec::new()),
    };
    let items: String =
        txids.iter().map(|txid| format!("<li><code class=\"txid\">{}</code></li>", escape_html(txid))).collect();
    format!(
        "<div class=\"receipt\" id=\"receipt\" data-testid=\"receipt\"{hidden}>\
         <h3 class=\"receipt-title\">Receipt</h3><dl>\
         <div><dt>Amount paid</dt><dd><span id=\"receipt-amount\" data-testid=\"receipt-amount\">{amount}</span> \
         <span id=\"receipt-currency\">{currency}</span></dd></div>\
         <div><dt>Paid at</dt><dd><time id=\"receipt-time\" data-testid=\"receipt-time\" datetime=\"{iso}\">{when}</time></dd></div>\
         <div id=\"receipt-txids-row\"{no_txids}><dt id=\"receipt-txids-label\">{label}</dt><dd><ul class=\"txids\" id=\"receipt-txids\" \
         data-testid=\"receipt-txids\" aria-labelledby=\"receipt-txids-label\">{items}</ul></dd></div>\
         </dl></div>",
        hidden = if receipt.is_some() { "" } else { " hidden" },
        amount = escape_html(&amount),
        currency = escape_html(currency),
        iso = escape_html(&iso),
        when = escape_html(&when),
        label = if txids.len() == 1 { "Transaction ID" } else { "Transaction IDs" },
        // An order the merchant marked paid may have no confirmed payment to list.
        no_txids = if txids.is_empty() { " hidden" } else { "" },
    )
}

/// The payment page for an order.
///
/// `base` is the path the page was asked for at (`/pay`, or the path of the configured
/// `payment_page_url`): without JavaScript, its buttons are forms posting to `base`'s
/// `/cancel` and `/simulate`, which answer with a redirect back to `base`.
pub fn payment_page(service: &Service, current: &OrderWithInvoice, base: &str) -> String {
    let (order, invoice) = (&current.order, &current.invoice);
    let facts = Facts::of(service, current);
    let status = order.status;
    let sandbox = order.environment == Environment::Sandbox;
    let terminal = status.is_terminal();
    let due = facts.due.unwrap_or(invoice.amount);
    let all_sent = due.is_zero() && status == OrderStatus::Pending;
    let partly = !due.is_zero() && due < invoice.amount;
    let (badge, detail) = if partly && status == OrderStatus::Pending { PARTLY_PAID } else { status_text(status) };
    let title = order.title.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or("Payment");
    let fiat = fiat_text(order.amount, &order.currency);
    let crypto = invoice.amount.normalize().to_string();
    let left_ms = invoice.expired_at.as_millis() - service.now().as_millis();
    let hidden = |hide: bool| if hide { " hidden" } else { "" };

    let data = status_json(service, current, &facts);
    let labels: serde_json::Map<String, Value> = STATUS_TEXT
        .iter()
        .map(|(name, badge, detail)| ((*name).to_string(), json!({"badge": badge, "detail": detail})))
        .collect();
    let config = json!({
        "labels": labels,
        "partly_paid": {"badge": PARTLY_PAID.0, "detail": PARTLY_PAID.1},
        "paid_redirect_delay_ms": PAID_REDIRECT_DELAY_MS,
    });

    let mut body = String::with_capacity(16 * 1024);
    if sandbox {
        body.push_str(
            "<aside class=\"banner\" id=\"sandbox-banner\" data-testid=\"sandbox-banner\" aria-label=\"Test mode\">\
             <strong>SANDBOX</strong> \u{2014} test mode: no real coins move, the buttons below simulate the customer.\
             </aside>",
        );
    }
    body.push_str("<main class=\"wrap\"><article class=\"card\" aria-labelledby=\"merchant-title\">");

    // Header: merchant title, description, state.
    // The merchant's name, when its key has one, above the order's title.
    match &facts.merchant_name {
        Some(name) => body.push_str(&format!(
            // <bdi>: direction marks in the name stay inside it, off the words around it.
            "<header class=\"head\"><p class=\"eyebrow\" id=\"merchant-name\" data-testid=\"merchant-name\"><bdi>{}</bdi> \u{b7} pay with crypto</p>",
            escape_html(name)
        )),
        None => body.push_str("<header class=\"head\"><p class=\"eyebrow\">Pay with crypto</p>"),
    }
    body.push_str(&format!("<h1 id=\"merchant-title\" data-testid=\"merchant-title\">{}</h1>", escape_html(title)));
    if let Some(description) = order.description.as_deref().filter(|d| !d.trim().is_empty()) {
        body.push_str(&format!(
            "<p class=\"desc\" id=\"description\" data-testid=\"description\">{}</p>",
            escape_html(description)
        ));
    }
    body.push_str(&format!(
        "<div class=\"status-row\"><span id=\"status\" data-testid=\"status\" class=\"pill\" data-status=\"{s}\" \
         role=\"status\" aria-live=\"polite\">{badge}</span><span class=\"price\" id=\"fiat-amount\" \
         data-testid=\"fiat-amount\">{fiat} {currency}</span></div>",
        s = status.as_str(),
        badge = escape_html(badge),
        fiat = escape_html(&fiat),
        currency = escape_html(&order.currency),
    ));
    body.push_str(&format!(
        "<p class=\"detail\" id=\"status-detail\" data-testid=\"status-detail\" tabindex=\"-1\">{}</p>",
        escape_html(detail)
    ));
    body.push_str("</header>");

    // What to pay, on which network and where: hidden once the order is over or
    // everything due was sent. The QR code asks for what is still due; when no URI can
    // (see due_payment_uri) it is hidden rather than asking for the wrong amount.
    let due_text = due.normalize().to_string();
    body.push_str(&format!(
        "<section class=\"pay{}\" id=\"pay-panel\" data-testid=\"pay-panel\" aria-label=\"How to pay\"{}>",
        if partly && facts.due_uri.is_empty() { " no-qr" } else { "" },
        hidden(terminal || all_sent)
    ));
    body.push_str("<div class=\"details\">");
    body.push_str(&format!(
        "<div class=\"field\"><span class=\"label\" id=\"amount-label\">{label}</span>\
         <div class=\"value-row\"><span class=\"amount\"><span id=\"crypto-amount\" data-testid=\"crypto-amount\">{due}</span> \
         <span id=\"pay-currency\" data-testid=\"pay-currency\" class=\"coin\">{coin}</span></span>\
         <button type=\"button\" class=\"copy needs-script\" id=\"copy-amount\" data-testid=\"copy-amount\" data-copy=\"{due}\" \
         aria-label=\"Copy the amount\">Copy</button></div>\
         <span class=\"sub\" id=\"amount-sub\">{sub}</span></div>",
        label = if partly { "Amount still due" } else { "Amount to send" },
        due = escape_html(&due_text),
        coin = escape_html(&invoice.currency),
        sub = escape_html(&if partly {
            format!("of {crypto} {} in total", invoice.currency)
        } else {
            format!("\u{2248} {fiat} {}", order.currency)
        }),
    ));
    if !facts.network.is_empty() {
        body.push_str(&format!(
            "<div class=\"field\"><span class=\"label\" id=\"network-label\">Network</span>\
             <strong class=\"network\" id=\"network\" data-testid=\"network\">{network}</strong>\
             <span class=\"sub\" id=\"network-note\">Send {coin} on this network only: coins sent on another \
             network can be lost.</span></div>",
            network = escape_html(facts.network),
            coin = escape_html(&invoice.currency),
        ));
    }
    if invoice.address.is_empty() {
        body.push_str(
            "<div class=\"field\"><span class=\"label\">Deposit address</span>\
             <p class=\"sub\" id=\"address-missing\">The deposit address is not available yet.</p></div>",
        );
    } else {
        body.push_str(&format!(
            "<div class=\"field\"><span class=\"label\">Send {coin} to this address</span>\
             <div class=\"address-box\"><code id=\"address\" data-testid=\"address\">{address}</code>\
             <button type=\"button\" class=\"copy needs-script\" id=\"copy-address\" data-testid=\"copy-address\" data-copy=\"{address}\" \
             aria-label=\"Copy the address\">Copy</button></div></div>",
            coin = escape_html(&invoice.currency),
            address = escape_html(&invoice.address),
        ));
    }
    body.push_str(&format!(
        "<div class=\"timer\" id=\"countdown-row\"><span id=\"countdown-label\">Time left to pay</span>\
         <strong id=\"countdown\" data-testid=\"countdown\" data-expires-at=\"{expires}\">{left}</strong></div>",
        expires = escape_html(&invoice.expired_at.to_iso()),
        left = countdown_text(left_ms),
    ));
    let received = !invoice.receive_currency.is_empty() && invoice.receive_amount > Decimal::ZERO;
    body.push_str(&format!(
        "<p class=\"received\" id=\"received\" data-testid=\"received\"{}>Received so far: <span id=\"received-amount\">{}</span></p>",
        hidden(!received || terminal),
        if received {
            escape_html(&format!(
                "{} of {} {}",
                fiat_text(invoice.receive_amount, &invoice.receive_currency),
                fiat,
                order.currency
            ))
        } else {
            String::new()
        },
    ));
    body.push_str("</div>");
    body.push_str(&format!(
        "<figure class=\"qr\" id=\"qr\" data-testid=\"qr\" data-payment-uri=\"{}\" data-amount=\"{}\">",
        escape_html(&facts.due_uri),
        escape_html(&due_text),
    ));
    match qr_svg(&facts.due_uri) {
        Some(svg) => {
            body.push_str(&format!(
                "<div class=\"qr-frame\">{svg}</div><figcaption>Scan with your wallet app</figcaption>"
            ));
            if let Some(link) = wallet_link(&facts.due_uri) {
                body.push_str(&link);
            }
        }
        None => body.push_str("<figcaption>No QR code: the deposit address is not available yet.</figcaption>"),
    }
    body.push_str("</figure></section>");

    // The outcome, once there is one (or the wait for confirmations once all was sent):
    // a receipt when PAID, what to do about coins already sent when EXPIRED.
    let icon = match status {
        OrderStatus::Paid => "\u{2713}",
        OrderStatus::Cancelled | OrderStatus::Failed => "\u{2715}",
        OrderStatus::Pending | OrderStatus::New => "\u{2026}",
        OrderStatus::Expired => "!",
    };
    body.push_str(&format!(
        "<section class=\"result\" id=\"result\" data-testid=\"result\" data-status=\"{s}\" aria-labelledby=\"result-title\"{h}>\
         <div class=\"result-icon\" id=\"result-icon\" aria-hidden=\"true\">{icon}</div>\
         <h2 id=\"result-title\" data-testid=\"result-title\" tabindex=\"-1\">{badge}</h2>",
        s = status.as_str(),
        h = hidden(!(terminal || all_sent)),
        badge = escape_html(badge),
    ));
    body.push_str(&receipt_html(facts.receipt.as_ref()));
    body.push_str(&format!(
        "<p class=\"late-help\" id=\"expired-help\" data-testid=\"expired-help\"{}>{}</p>",
        hidden(status != OrderStatus::Expired),
        escape_html(EXPIRED_HELP),
    ));
    body.push_str(
        "<p class=\"redirect-note\" id=\"redirect-note\" data-testid=\"redirect-note\" role=\"status\" hidden>\
         Returning you to the merchant\u{2026}</p>",
    );
    // A cancelled order's way back is its redirect, which the script follows at once;
    // without a script the customer follows this link.
    let cancelled_back = (status == OrderStatus::Cancelled).then(|| callback_redirect_url(order)).flatten();
    match facts.return_url.as_ref().or(cancelled_back.as_ref()) {
        Some(url) => body.push_str(&format!(
            "<a class=\"btn primary shop-link\" id=\"back-to-shop\" data-testid=\"back-to-shop\" href=\"{}\">Back to the shop</a>",
            escape_html(url)
        )),
        None => body.push_str(
            "<a class=\"btn primary shop-link\" id=\"back-to-shop\" data-testid=\"back-to-shop\" hidden>Back to the shop</a>",
        ),
    }
    body.push_str("</section>");

    // Errors and buttons; Cancel only asks, the confirmation below it cancels.
    body.push_str(
        "<div class=\"error\" id=\"error\" data-testid=\"error\" role=\"alert\" hidden></div>\
         <p class=\"offline\" id=\"offline\" data-testid=\"offline\" hidden>Connection lost \u{2014} retrying\u{2026}</p>",
    );
    body.push_str(&format!(
        "<div class=\"actions needs-script\" id=\"actions\">\
         <button type=\"button\" class=\"btn primary\" id=\"simulate-pay\" data-testid=\"simulate-pay\"{sim}>Simulate payment</button>\
         <button type=\"button\" class=\"btn secondary\" id=\"cancel\" data-testid=\"cancel\" aria-haspopup=\"dialog\" \
         aria-expanded=\"false\" aria-controls=\"cancel-confirm\"{cancel}>Cancel</button>\
         </div>",
        sim = hidden(!(sandbox && matches!(status, OrderStatus::New | OrderStatus::Pending) && !all_sent)),
        cancel = hidden(status != OrderStatus::New),
    ));
    body.push_str(
        "<div class=\"confirm\" id=\"cancel-confirm\" data-testid=\"cancel-confirm\" role=\"alertdialog\" \
         aria-labelledby=\"cancel-confirm-title\" aria-describedby=\"cancel-confirm-text\" hidden>\
         <p class=\"confirm-title\" id=\"cancel-confirm-title\">Cancel this payment?</p>\
         <p class=\"confirm-text\" id=\"cancel-confirm-text\">Only cancel if you have not sent any coins. \
         The order is closed and cannot be paid afterwards.</p>\
         <div class=\"confirm-actions\">\
         <button type=\"button\" class=\"btn danger\" id=\"cancel-yes\" data-testid=\"cancel-yes\">Yes, cancel payment</button>\
         <button type=\"button\" class=\"btn secondary\" id=\"cancel-no\" data-testid=\"cancel-no\">Keep paying</button>\
         </div></div>",
    );
    body.push_str(&script_free_actions(
        base,
        &order.order_id,
        sandbox && matches!(status, OrderStatus::New | OrderStatus::Pending) && !all_sent,
        status == OrderStatus::New,
    ));
    body.push_str(&format!(
        "<footer class=\"foot\"><span>Order</span> <code id=\"order-id\" data-testid=\"order-id\">{}</code></footer>",
        escape_html(&order.order_id)
    ));
    body.push_str("</article><p class=\"powered\">Powered by coinorder</p></main>");
    body.push_str(
        "<noscript><p class=\"noscript\">Turn on JavaScript for the live timer and status, or reload this page to refresh it.</p></noscript>",
    );
    body.push_str(&format!(
        "<script type=\"application/json\" id=\"order-data\">{}</script>\
         <script type=\"application/json\" id=\"page-config\">{}</script>\
         <script>{PAGE_SCRIPT}</script>",
        script_json(&data),
        script_json(&config),
    ));

    // A tab's title has no markup to isolate the merchant's text in: direction marks are
    // left out of it, so that none can turn the amount after it around.
    let title: String = title.chars().filter(|c| !is_direction_mark(*c)).collect();
    let head_title = format!("{title} \u{2014} {crypto} {}", invoice.currency);
    document(&head_title, &body)
}

/// The page's buttons for a browser without JavaScript: plain forms, so a customer can
/// still pay in the sandbox and cancel (behind a `<details>` that asks first, as the
/// scripted dialog does). Each posts to `base` and is answered by a redirect back to the
/// page, which then shows the outcome; the scripted buttons are hidden in that case
/// (`.needs-script`).
fn script_free_actions(base: &str, order_id: &str, can_simulate: bool, can_cancel: bool) -> String {
    if !can_simulate && !can_cancel {
        return String::new();
    }
    let query: String = url::form_urlencoded::Serializer::new(String::new()).append_pair("id", order_id).finish();
    let mut html = String::from("<noscript>");
    if can_simulate {
        html.push_str(&format!(
            "<div class=\"actions\"><form method=\"post\" action=\"{}\">\
             <button type=\"submit\" class=\"btn primary\" data-testid=\"simulate-pay-form\">Simulate payment</button>\
             </form></div>",
            escape_html(&format!("{base}/simulate?{query}")),
        ));
    }
    if can_cancel {
        html.push_str(&format!(
            "<details class=\"confirm script-free\" data-testid=\"cancel-form\">\
             <summary class=\"confirm-title\" data-testid=\"cancel-form-open\">Cancel this payment</summary>\
             <p class=\"confirm-text\">Only cancel if you have not sent any coins. \
             The order is closed and cannot be paid afterwards.</p>\
             <form method=\"post\" action=\"{}\">\
             <button type=\"submit\" class=\"btn danger\" data-testid=\"cancel-form-yes\">Yes, cancel payment</button>\
             </form></details>",
            escape_html(&format!("{base}/cancel?{query}")),
        ));
    }
    html.push_str("</noscript>");
    html
}

/// The page shown for an unknown order id.
pub fn not_found_page() -> String {
    message_page(
        "Payment not found",
        "This payment link is not valid. Please check the link you received from the merchant.",
        "not-found",
    )
}

/// The page shown when the service fails. It says nothing about the failure itself.
pub fn error_page(_error: &Error) -> String {
    message_page(
        "Something went wrong",
        "The payment page could not be shown right now. Please try again in a moment.",
        "server-error",
    )
}

fn message_page(heading: &str, text: &str, testid: &str) -> String {
    let body = format!(
        "<main class=\"wrap\"><article class=\"card message\" data-testid=\"{testid}\">\
         <div class=\"result-icon\" aria-hidden=\"true\">!</div>\
         <h1>{heading}</h1><p class=\"detail\">{text}</p></article>\
         <p class=\"powered\">Powered by coinorder</p></main>",
        testid = escape_html(testid),
        heading = escape_html(heading),
        text = escape_html(text),
    );
    document(heading, &body)
}

/// The characters that set or change the direction of the text after them.
fn is_direction_mark(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The HTML document around a page body: inline style, strict CSP (nothing loads from
/// anywhere; the script may only call back to this server, and forms only post to it).
fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
         script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'self'\">\
         <meta name=\"referrer\" content=\"no-referrer\"><meta name=\"robots\" content=\"noindex\">\
         <title>{}</title><style>{PAGE_STYLE}</style>\
         <noscript><style>.needs-script{{display:none!important}}</style></noscript></head><body>{body}</body></html>\n",
        escape_html(title)
    )
}

// Colours are variables so the dark theme is one block; every text/background pair
// meets WCAG AA (4.5:1) in both themes, and the focus ring (--focus) is at least 3:1
// against whatever surrounds it.
const PAGE_STYLE: &str = r#"
:root{--bg:#f3f4f8;--card:#fff;--text:#101828;--muted:#5d6679;--line:#e5e7ee;--soft:#f7f8fb;
--accent:#4338ca;--btn:#4338ca;--btn-hover:#3730a3;--btn-text:#fff;--danger:#b42318;--danger-hover:#912018;
--control:#fff;--control-hover:#eef0ff;--control-line:#d0d5dd;--link-bg:#f5f7ff;--link-line:#c7d2fe;
--neutral:#475467;--neutral-bg:#eaecf0;--ok:#067647;--ok-bg:#dcfae6;--warn:#b54708;--warn-bg:#fef0c7;
--bad:#b42318;--bad-bg:#fee4e2;--bad-line:#fecdca;--info:#175cd3;--info-bg:#d1e9ff;--focus:#4338ca;
--shadow:0 1px 2px rgba(16,24,40,.05),0 12px 32px -8px rgba(16,24,40,.12);color-scheme:light}
@media (prefers-color-scheme:dark){
:root{--bg:#0b0f19;--card:#151b28;--text:#eef1f6;--muted:#a9b2c3;--line:#2a3344;--soft:#1b2333;
--accent:#a5b4fc;--btn:#4f46e5;--btn-hover:#4338ca;--btn-text:#fff;--danger:#c4320a;--danger-hover:#9c2a10;
--control:#1f2838;--control-hover:#273248;--control-line:#3a4558;--link-bg:#1f2540;--link-line:#4c5696;
--neutral:#d0d5dd;--neutral-bg:#2c3545;--ok:#75e0a7;--ok-bg:#0a3a26;--warn:#fdb022;--warn-bg:#3d2608;
--bad:#fda29b;--bad-bg:#4a1510;--bad-line:#7a271a;--info:#84caff;--info-bg:#0f2d57;--focus:#c7d2fe;
--shadow:0 1px 2px rgba(0,0,0,.4),0 12px 32px -8px rgba(0,0,0,.6);color-scheme:dark}
}
*{box-sizing:border-box}
html,body{margin:0}
body{min-height:100vh;background:var(--bg);color:var(--text);
font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","DejaVu Sans",sans-serif;
-webkit-font-smoothing:antialiased}
[hidden]{display:none!important}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono","DejaVu Sans Mono",monospace}
.banner{background:repeating-linear-gradient(135deg,#fde68a 0 14px,#fcd34d 14px 28px);color:#5c2c06;
text-align:center;padding:9px 16px;font-size:14px;border-bottom:1px solid #f5b73b}
.banner strong{letter-spacing:.12em;margin-right:2px}
.wrap{max-width:760px;margin:0 auto;padding:40px 20px 24px}
.card{background:var(--card);border:1px solid var(--line);border-radius:18px;box-shadow:var(--shadow);overflow:hidden}
.head{padding:28px 32px 20px;border-bottom:1px solid var(--line)}
.eyebrow{margin:0 0 4px;font-size:12px;font-weight:600;letter-spacing:.08em;text-transform:uppercase;color:var(--muted)}
h1{margin:0;font-size:26px;line-height:1.25;font-weight:700;overflow-wrap:anywhere}
.desc{margin:6px 0 0;color:var(--muted);overflow-wrap:anywhere;white-space:pre-line}
.status-row{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:10px;margin-top:16px}
.price{font-size:22px;font-weight:700;font-variant-numeric:tabular-nums;white-space:nowrap}
.pill{display:inline-flex;align-items:center;gap:7px;padding:5px 12px;border-radius:999px;font-size:14px;font-weight:600;
background:var(--info-bg);color:var(--info)}
.pill::before{content:"";width:8px;height:8px;border-radius:50%;background:currentColor}
.pill[data-status=NEW]::before,.pill[data-status=PENDING]::before{animation:pulse 1.6s ease-in-out infinite}
.pill[data-status=PENDING]{background:var(--warn-bg);color:var(--warn)}
.pill[data-status=PAID]{background:var(--ok-bg);color:var(--ok)}
.pill[data-status=EXPIRED],.pill[data-status=CANCELLED]{background:var(--neutral-bg);color:var(--neutral)}
.pill[data-status=FAILED]{background:var(--bad-bg);color:var(--bad)}
@keyframes pulse{50%{opacity:.35}}
.detail{margin:10px 0 0;color:var(--muted);font-size:15px}
.pay{display:grid;grid-template-columns:minmax(0,1fr) 232px;gap:28px;padding:24px 32px;align-items:start}
.field{margin-bottom:18px}
.label{display:block;font-size:13px;font-weight:600;color:var(--muted);margin-bottom:6px}
.value-row{display:flex;align-items:center;gap:10px;flex-wrap:wrap}
.amount{font-size:24px;font-weight:700;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
.coin{color:var(--accent)}
.network{display:inline-block;font-size:16px;font-weight:700}
.sub{display:block;color:var(--muted);font-size:14px;margin:2px 0 0}
.address-box{display:flex;align-items:stretch;border:1px solid var(--line);border-radius:12px;background:var(--soft);overflow:hidden}
.address-box code{flex:1;min-width:0;padding:11px 12px;font-size:14px;line-height:1.45;word-break:break-all;user-select:all}
.address-box .copy{border:0;border-left:1px solid var(--line);border-radius:0}
.copy{flex:none;font:inherit;font-size:13px;font-weight:600;padding:6px 12px;border:1px solid var(--control-line);border-radius:8px;
background:var(--control);color:var(--accent);cursor:pointer}
.copy:hover{background:var(--control-hover)}
.copy.done{color:var(--ok)}
.timer{display:flex;align-items:center;justify-content:space-between;gap:12px;padding:11px 14px;border-radius:12px;
background:var(--soft);border:1px solid var(--line);font-size:14px;color:var(--muted)}
.timer strong{font-size:20px;color:var(--text);font-variant-numeric:tabular-nums;letter-spacing:.02em}
.timer.soon strong{color:var(--warn)}
.timer.over strong{color:var(--bad)}
.received{margin:14px 0 0;font-size:14px;color:var(--warn);font-weight:600}
.qr{margin:0;text-align:center}
.qr-frame{background:#fff;border:1px solid var(--line);border-radius:14px;padding:10px;line-height:0}
.qr-frame svg{width:100%;height:auto;display:block}
.qr figcaption{margin-top:8px;font-size:13px;color:var(--muted)}
.wallet-link{display:inline-block;margin-top:10px;padding:6px 14px;border:1px solid var(--link-line);border-radius:999px;
font-size:13px;font-weight:600;color:var(--accent);text-decoration:none;background:var(--link-bg)}
.wallet-link:hover{background:var(--control-hover)}
.pay.no-qr{grid-template-columns:1fr}
.pay.no-qr .qr{display:none}
.result{padding:36px 32px 12px;text-align:center}
.result-icon{width:64px;height:64px;margin:0 auto 12px;border-radius:50%;display:flex;align-items:center;justify-content:center;
font-size:32px;font-weight:700;background:var(--neutral-bg);color:var(--neutral)}
.result[data-status=PAID] .result-icon{background:var(--ok-bg);color:var(--ok)}
.result[data-status=FAILED] .result-icon{background:var(--bad-bg);color:var(--bad)}
.result[data-status=PENDING] .result-icon{background:var(--warn-bg);color:var(--warn);animation:pulse 1.6s ease-in-out infinite}
.result h2{margin:0;font-size:24px}
.result h2:focus{outline:none}
.receipt{max-width:460px;margin:20px auto 0;text-align:left;border:1px solid var(--line);border-radius:14px;background:var(--soft);
padding:14px 18px}
.receipt-title{margin:0 0 6px;font-size:13px;font-weight:600;letter-spacing:.08em;text-transform:uppercase;color:var(--muted)}
.receipt dl{margin:0}
.receipt dl>div{display:flex;flex-wrap:wrap;justify-content:space-between;gap:4px 16px;padding:8px 0;border-top:1px solid var(--line)}
.receipt dl>div:first-child{border-top:0}
.receipt dt{color:var(--muted);font-size:14px}
.receipt dd{margin:0;font-weight:600;text-align:right;min-width:0;overflow-wrap:anywhere;font-variant-numeric:tabular-nums}
.txids{list-style:none;margin:0;padding:0}
.txid{font-size:13px;font-weight:500;word-break:break-all;user-select:all}
.late-help{max-width:520px;margin:18px auto 0;padding:12px 16px;border-radius:12px;background:var(--warn-bg);color:var(--text);
border:1px solid var(--line);font-size:15px;text-align:left}
.redirect-note{color:var(--muted);margin:12px 0 0}
.shop-link{display:inline-block;margin-top:18px;text-decoration:none;flex:none}
.error{margin:0 32px 16px;padding:11px 14px;border-radius:12px;background:var(--bad-bg);color:var(--bad);font-size:14px;
border:1px solid var(--bad-line)}
.offline{margin:0 32px 16px;color:var(--warn);font-size:14px}
.actions{display:flex;gap:12px;padding:0 32px 24px}
.actions:not(:has(.btn:not([hidden]))){display:none}
.btn{flex:1;font:inherit;font-weight:600;font-size:16px;padding:13px 18px;border-radius:12px;cursor:pointer;
border:1px solid transparent;transition:background .15s,opacity .15s}
.btn.primary{background:var(--btn);color:var(--btn-text)}
.btn.primary:hover{background:var(--btn-hover)}
.btn.secondary{flex:0 1 auto;min-width:120px;background:var(--control);color:var(--text);border-color:var(--control-line)}
.btn.secondary:hover{background:var(--soft)}
.btn.danger{background:var(--danger);color:#fff}
.btn.danger:hover{background:var(--danger-hover)}
.btn:disabled{opacity:.55;cursor:progress}
.confirm{margin:0 32px 24px;padding:16px 18px;border:1px solid var(--bad-line);border-radius:14px;background:var(--soft)}
.confirm-title{margin:0;font-weight:700;font-size:17px}
.confirm-text{margin:4px 0 14px;color:var(--muted);font-size:15px}
.confirm-actions{display:flex;gap:12px;flex-wrap:wrap}
.actions form{display:flex;flex:1}
.script-free summary{cursor:pointer}
.script-free form{display:flex}
a:focus-visible,button:focus-visible{outline:3px solid var(--focus);outline-offset:2px}
.address-box .copy:focus-visible{outline-offset:-5px}
.foot{display:flex;gap:8px;align-items:baseline;padding:14px 32px;border-top:1px solid var(--line);background:var(--soft);
font-size:12px;color:var(--muted)}
.foot code{overflow-wrap:anywhere}
.powered{text-align:center;font-size:12px;color:var(--muted);margin:16px 0 0}
.noscript{text-align:center;color:var(--muted);font-size:14px}
.message{max-width:460px;margin:40px auto 0;padding:40px 32px;text-align:center}
.message h1{font-size:24px}
@media (max-width:700px){
.wrap{padding:16px 12px}
.head{padding:22px 20px 18px}
h1{font-size:22px}
.pay{grid-template-columns:1fr;gap:18px;padding:20px}
.qr-frame{max-width:200px;margin:0 auto}
.amount{font-size:22px}
.error,.offline{margin-left:20px;margin-right:20px}
.actions{padding:0 20px 20px;flex-direction:column-reverse}
.btn.secondary{flex:1}
.confirm{margin:0 20px 20px}
.confirm-actions{flex-direction:column-reverse}
.foot{padding:12px 20px}
.result{padding:28px 20px 8px}
.receipt dd{text-align:left}
.message{margin-top:16px;padding:32px 20px}
}
@media (prefers-reduced-motion:reduce){
*,*::before,*::after{animation:none!important;transition:none!important;scroll-behavior:auto!important}
}
"#;

const PAGE_SCRIPT: &str = r#"
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("order-data").textContent);
  var config = JSON.parse(document.getElementById("page-config").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var base = window.location.pathname.replace(/\/+$/, "");
  var query = "?id=" + encodeURIComponent(data.order_id);
  var TERMINAL = { PAID: 1, CANCELLED: 1, EXPIRED: 1, FAILED: 1 };
  var skew = Date.now() - data.now_t;
  var busy = false, redirecting = false, finished = false, generation = 0, pollTimer = null;
  var qrLoading = null;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function left(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return (h > 0 ? h + ":" + pad(m) : pad(m)) + ":" + pad(sec);
  }

  function tick() {
    var row = $("countdown-row");
    if (!row || TERMINAL[data.status]) return;
    var remaining = data.expired_at_t - (Date.now() - skew);
    $("countdown").textContent = left(remaining);
    row.classList.toggle("soon", remaining > 0 && remaining < 5 * 60 * 1000);
    row.classList.toggle("over", remaining <= 0);
    $("countdown-label").textContent = remaining > 0 ? "Time left to pay"
      : (data.status === "PENDING" ? "Quote closed \u2014 awaiting confirmation" : "Time is up");
  }

  function setButtons() {
    var off = busy || redirecting;
    ["simulate-pay", "cancel", "cancel-yes", "cancel-no"].forEach(function (id) { $(id).disabled = off; });
    $("actions").setAttribute("aria-busy", busy ? "true" : "false");
  }

  function showError(message, code) {
    var box = $("error");
    box.textContent = message;
    if (code) box.setAttribute("data-error-code", code); else box.removeAttribute("data-error-code");
    box.hidden = false;
  }
  function clearError() { $("error").hidden = true; $("error").textContent = ""; }

  function safeUrl(url) {
    try { var u = new URL(url, window.location.href); return u.protocol === "http:" || u.protocol === "https:"; }
    catch (e) { return false; }
  }

  // Crypto amounts are read from the JSON text itself: a JS number could not hold
  // 18 decimals exactly. Numbers there are plain decimals (never exponents). A member
  // name follows "{" or ","; inside a JSON string a quote is always escaped, so text
  // the merchant wrote can never pass for a member.
  function amountText(raw, name) {
    var m = new RegExp('[{,]"' + name + '":(-?[0-9][0-9.]*)').exec(raw);
    return m ? m[1] : null;
  }
  function isZero(text) { return /^-?0*(\.0*)?$/.test(text); }

  // The QR code is drawn on the server; once the amount due changes, the page fetches
  // itself and takes the new one. Until it has it the QR is hidden: it would ask for
  // the wrong amount.
  function qrShown() { return $("qr").getAttribute("data-payment-uri") || ""; }
  function syncQr(partly) {
    var want = data.due_payment_uri || "";
    $("pay-panel").classList.toggle("no-qr", partly && (!want || want !== qrShown()));
    if (!want || want === qrShown() || qrLoading === want) return;
    qrLoading = want;
    fetch(base + query, { cache: "no-store", headers: { accept: "text/html" } })
      .then(function (response) { return response.ok ? response.text() : ""; })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("qr");
        if (fresh && fresh.getAttribute("data-payment-uri") === data.due_payment_uri) {
          $("qr").replaceWith(document.importNode(fresh, true));
        }
      })
      .catch(function () { /* the next poll tries again */ })
      .then(function () {
        qrLoading = null;
        var want = data.due_payment_uri || "";
        $("pay-panel").classList.toggle("no-qr", partly && (!want || want !== qrShown()));
      });
  }

  function showReceipt(receipt) {
    $("receipt").hidden = !receipt;
    if (!receipt) return;
    $("receipt-amount").textContent = receipt.amount;
    $("receipt-currency").textContent = receipt.currency;
    $("receipt-time").textContent = receipt.paid_at_text;
    $("receipt-time").setAttribute("datetime", receipt.paid_at);
    $("receipt-txids-label").textContent = receipt.payments.length === 1 ? "Transaction ID" : "Transaction IDs";
    $("receipt-txids-row").hidden = receipt.payments.length === 0;
    var list = $("receipt-txids");
    while (list.firstChild) list.removeChild(list.firstChild);
    receipt.payments.forEach(function (payment) {
      var item = document.createElement("li");
      var code = document.createElement("code");
      code.className = "txid";
      code.textContent = payment.txid;
      item.appendChild(code);
      list.appendChild(item);
    });
  }

  function setText(element, text) {
    if (element.textContent !== text) element.textContent = text;
  }

  function apply(next, raw) {
    // A refusal shown for the state the page had is out of date once the page catches up.
    if (data && data.status !== next.status) clearError();
    data = next;
    skew = Date.now() - next.now_t;
    var st = next.status, terminal = !!TERMINAL[st];
    var total = amountText(raw, "pay_amount") || String(next.pay_amount);
    var due = amountText(raw, "due_amount") || total;
    var allSent = st === "PENDING" && isZero(due);
    var partly = !isZero(due) && due !== total;
    var label = (partly && st === "PENDING" ? config.partly_paid : config.labels[st]) || { badge: st, detail: "" };
    document.body.setAttribute("data-status", st);
    var pill = $("status");
    // Written only when it changes: the badge is a live region, and a screen reader would
    // read out again every poll that rewrote the same words.
    setText(pill, label.badge);
    pill.setAttribute("data-status", st);
    setText($("status-detail"), label.detail);

    var panel = $("pay-panel");
    panel.hidden = terminal || allSent;
    $("amount-label").textContent = partly ? "Amount still due" : "Amount to send";
    $("crypto-amount").textContent = due;
    $("copy-amount").setAttribute("data-copy", due);
    $("amount-sub").textContent = partly ? "of " + total + " " + next.pay_currency + " in total"
      : "\u2248 " + next.price_text + " " + next.price_currency;
    if ($("network")) $("network").textContent = next.network;
    var receive = amountText(raw, "receive_amount") || "0";
    var got = !isZero(receive) && next.receive_currency;
    $("received").hidden = !got || terminal;
    if (got) $("received-amount").textContent = next.receive_text + " of " + next.price_text + " " + next.price_currency;
    syncQr(partly);

    var result = $("result");
    result.hidden = !(terminal || allSent);
    result.setAttribute("data-status", st);
    setText($("result-title"), label.badge);
    $("result-icon").textContent = st === "PAID" ? "\u2713" : (st === "CANCELLED" || st === "FAILED") ? "\u2715"
      : st === "EXPIRED" ? "!" : "\u2026";
    showReceipt(st === "PAID" ? next.receipt : null);
    $("expired-help").hidden = st !== "EXPIRED";
    var shop = $("back-to-shop");
    if (next.return_url && safeUrl(next.return_url)) {
      shop.setAttribute("href", next.return_url);
      shop.hidden = false;
    } else {
      shop.removeAttribute("href");
      shop.hidden = true;
    }
    $("simulate-pay").hidden = !(next.sandbox && (st === "NEW" || st === "PENDING") && !allSent);
    $("cancel").hidden = st !== "NEW";
    if (st !== "NEW") {
      // The confirmation closes under the customer (the order was paid or ran out
      // meanwhile): keep their keyboard and screen reader on the outcome, not on nothing.
      var confirming = !$("cancel-confirm").hidden && $("cancel-confirm").contains(document.activeElement);
      closeConfirm(false);
      if (confirming) (result.hidden ? $("status-detail") : $("result-title")).focus();
    }
    tick();
    if (next.redirect_url && safeUrl(next.redirect_url) && !redirecting) {
      // A PAID page shows its receipt for a moment first; a cancelled one has nothing to read.
      var delay = st === "PAID" ? config.paid_redirect_delay_ms : 0;
      redirecting = true;
      finished = true;
      clearTimeout(pollTimer);
      var note = $("redirect-note");
      note.textContent = delay ? "Returning you to the shop in " + Math.round(delay / 1000) + " seconds\u2026"
        : "Returning you to the merchant\u2026";
      note.hidden = false;
      setButtons();
      setTimeout(function () { window.location.assign(next.redirect_url); }, delay);
      return;
    }
    if (st === "PAID" || st === "CANCELLED") finished = true;
    setButtons();
  }

  function readJson(response) {
    return response.text().then(function (raw) { return { ok: response.ok, body: JSON.parse(raw), raw: raw }; });
  }

  function schedule(ms) {
    clearTimeout(pollTimer);
    if (!finished) pollTimer = setTimeout(poll, ms);
  }

  function poll() {
    var started = generation;
    fetch(base + "/status" + query, { cache: "no-store", headers: { accept: "application/json" } })
      .then(readJson)
      .then(function (res) {
        $("offline").hidden = true;
        if (started === generation && !busy) {
          if (res.ok) apply(res.body, res.raw);
          else showError(res.body.error || "The status could not be read.", res.body.error_code);
        }
        schedule(data.status === "EXPIRED" || data.status === "FAILED" ? 5000 : 1500);
      })
      .catch(function () { $("offline").hidden = false; schedule(3000); });
  }

  function act(action) {
    if (busy || redirecting) return;
    busy = true;
    setButtons();
    clearError();
    fetch(base + "/" + action + query, { method: "POST", cache: "no-store", headers: { accept: "application/json" } })
      .then(readJson)
      .then(function (res) {
        generation += 1;
        busy = false;
        if (res.ok) {
          apply(res.body, res.raw);
          // The button just pressed is gone: keep keyboard and screen reader users on the outcome.
          if (TERMINAL[res.body.status]) $("result-title").focus();
        } else {
          showError(res.body.error || "The request failed.", res.body.error_code);
        }
      })
      .catch(function () {
        busy = false;
        showError("The server could not be reached. Please try again.");
      })
      .then(function () { setButtons(); });
  }

  // Cancel only opens the confirmation; its first button is the safe one.
  function openConfirm() {
    if (busy || redirecting) return;
    $("cancel-confirm").hidden = false;
    $("cancel").setAttribute("aria-expanded", "true");
    $("cancel-no").focus();
  }
  function closeConfirm(refocus) {
    var box = $("cancel-confirm");
    if (box.hidden) return;
    box.hidden = true;
    $("cancel").setAttribute("aria-expanded", "false");
    if (refocus && !$("cancel").hidden) $("cancel").focus();
  }

  function copy(button) {
    var text = button.getAttribute("data-copy") || "";
    var done = function () {
      button.textContent = "Copied";
      button.classList.add("done");
      setTimeout(function () { button.textContent = "Copy"; button.classList.remove("done"); }, 1500);
    };
    var fallback = function () {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* nothing to do */ }
      document.body.removeChild(area);
    };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  }

  $("simulate-pay").addEventListener("click", function () { act("simulate"); });
  $("cancel").addEventListener("click", openConfirm);
  $("cancel-no").addEventListener("click", function () { closeConfirm(true); });
  $("cancel-yes").addEventListener("click", function () { closeConfirm(false); act("cancel"); });
  $("cancel-confirm").addEventListener("keydown", function (event) {
    if (event.key === "Escape") { event.preventDefault(); closeConfirm(true); }
  });
  Array.prototype.forEach.call(document.querySelectorAll("button.copy"), function (button) {
    button.addEventListener("click", function () { copy(button); });
  });

  apply(data, document.getElementById("order-data").textContent);
  setInterval(tick, 500);
  schedule(1500);
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_html_neutralizes_markup() {
        assert_eq!(
            escape_html("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
        assert_eq!(escape_html("Café ✓"), "Café ✓");
    }

    #[test]
    fn script_json_cannot_close_the_script_element() {
        let text = script_json(&json!({"title": "</script><!-- & -->"}));
        assert!(!text.contains('<') && !text.contains('>') && !text.contains('&'), "{text}");
        let back: Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(back["title"], "</script><!-- & -->");
    }

    #[test]
    fn countdown_formats_minutes_and_hours() {
        assert_eq!(countdown_text(30 * 60 * 1000), "30:00");
        assert_eq!(countdown_text(65_999), "01:05");
        assert_eq!(countdown_text(3_600_000 + 61_000), "1:01:01");
        assert_eq!(countdown_text(-5), "00:00");
    }

    #[test]
    fn qr_is_inline_svg_without_prolog() {
        let svg = qr_svg("bitcoin:tb1qexample?amount=0.001").expect("qr");
        assert!(svg.starts_with("<svg id=\"qr-svg\""), "{svg}");
        assert!(svg.contains("<path") && svg.ends_with("</svg>"));
        assert_eq!(qr_svg(""), None);
    }

    #[test]
    fn error_and_not_found_pages_are_styled_and_leak_nothing() {
        let error = Error::new(crate::ErrorKind::Config("cannot open /srv/secret/coinorder.db".into()));
        let page = error_page(&error);
        assert!(page.contains("<h1>Something went wrong</h1>") && page.contains("<style>"), "{page}");
        assert!(!page.contains("secret") && !page.contains("coinorder.db"), "{page}");
        assert!(!page.contains("<script"));
        let missing = not_found_page();
        assert!(missing.contains("<h1>Payment not found</h1>") && missing.contains("<style>"), "{missing}");
    }

    #[test]
    fn wallet_links_only_for_wallet_schemes() {
        assert!(wallet_link("bitcoin:tb1q?amount=1").is_some());
        assert!(wallet_link("javascript:alert(1)").is_none());
    }

    #[test]
    fn every_coin_names_its_network_in_both_environments() {
        use Environment::{Live, Sandbox};
        for (currency, live, sandbox) in [
            ("BTC", "Bitcoin", "Bitcoin testnet"),
            ("ETH", "Ethereum mainnet", "Sepolia test network"),
            ("USDT", "Ethereum mainnet (ERC-20)", "Sepolia test network (ERC-20)"),
            ("USDC", "Ethereum mainnet (ERC-20)", "Sepolia test network (ERC-20)"),
            ("LTC", "Litecoin", "Litecoin testnet"),
            ("TRX", "TRON", "TRON test network"),
            ("SOL", "Solana", "Solana test network"),
        ] {
            assert_eq!(network_name(Live, currency), live, "{currency}");
            assert_eq!(network_name(Sandbox, currency), sandbox, "{currency}");
        }
        // Every coin the service quotes has a name; anything else has none.
        for (coin, _) in crate::money::COINS {
            assert!(!network_name(Live, coin).is_empty() && !network_name(Sandbox, coin).is_empty(), "{coin}");
        }
        assert_eq!(network_name(Live, "DOGE"), "");
    }

    fn invoice(environment: Environment, currency: &str, amount: &str) -> Invoice {
        let amount: Decimal = amount.parse().expect("amount");
        let address = crate::addresses::sandbox_address("inv-1", currency);
        Invoice {
            invoice_id: "inv-1".into(),
            order_id: "order-1".into(),
            merchant_order_id: "m-1".into(),
            amount,
            currency: currency.into(),
            rate: Decimal::ONE,
            status: OrderStatus::New,
            receive_amount: Decimal::ZERO,
            receive_currency: String::new(),
            created_at: Timestamp(0),
            expired_at: Timestamp(1),
            updated_at: Timestamp(0),
            payment_uri: payment_uri_for(environment, currency, &address, amount),
            address,
            derivation_index: None,
        }
    }

    #[test]
    fn the_due_uri_asks_for_what_is_still_due() {
        let dec = |text: &str| text.parse::<Decimal>().expect("decimal");
        let usdt = invoice(Environment::Sandbox, "USDT", "5");
        assert_eq!(due_payment_uri(Environment::Sandbox, &usdt, dec("5.000")), usdt.payment_uri);
        let rest = due_payment_uri(Environment::Sandbox, &usdt, dec("2.5"));
        assert_eq!(rest, payment_uri_for(Environment::Sandbox, "USDT", &usdt.address, dec("2.5")));
        assert!(rest.ends_with("&uint256=2500000") && rest.contains("@11155111/"), "{rest}");
        let btc = invoice(Environment::Live, "BTC", "0.002");
        assert_eq!(
            due_payment_uri(Environment::Live, &btc, dec("0.00050001")),
            format!("bitcoin:{}?amount=0.00050001", btc.address)
        );
        // Nothing due, no address, or a URI the host wrote itself: no URI rather than a
        // wrong one.
        assert_eq!(due_payment_uri(Environment::Live, &btc, Decimal::ZERO), "");
        let custom = Invoice { payment_uri: format!("bitcoin:{}?amount=0.002&label=Shop", btc.address), ..btc.clone() };
        assert_eq!(due_payment_uri(Environment::Live, &custom, dec("0.001")), "");
        assert_eq!(due_payment_uri(Environment::Live, &custom, dec("0.002")), custom.payment_uri);
        let nowhere = Invoice { address: String::new(), payment_uri: String::new(), ..btc };
        assert_eq!(due_payment_uri(Environment::Live, &nowhere, dec("0.001")), "");
    }

    fn payment(txid: &str, amount: &str, state: PaymentState, counts: bool) -> Payment {
        Payment {
            txid: txid.into(),
            order_id: "order-1".into(),
            amount: amount.parse().expect("amount"),
            currency: "BTC".into(),
            state,
            counts,
            seen_at: Timestamp(0),
            settled_at: None,
        }
    }

    #[test]
    fn the_receipt_adds_up_the_confirmed_payments_exactly() {
        let payments = [
            payment("tx-a", "0.10000000", PaymentState::Confirmed, true),
            payment("tx-b", "0.2", PaymentState::Rejected, true),
            payment("tx-c", "0.00000001", PaymentState::Confirmed, false),
            payment("tx-d", "5", PaymentState::Unconfirmed, true),
        ];
        let receipt = receipt_of("BTC", &payments, Timestamp(1_795_326_682_123));
        assert_eq!(receipt.amount.to_string(), "0.10000001");
        assert_eq!(
            receipt.payments,
            vec![
                ("tx-a".to_string(), "0.1".parse().expect("d")),
                ("tx-c".to_string(), "0.00000001".parse().expect("d"))
            ]
        );
        assert_eq!(receipt.currency, "BTC");
        let html = receipt_html(Some(&receipt));
        assert!(html.contains(">0.10000001</span>") && html.contains("<code class=\"txid\">tx-c</code>"), "{html}");
        assert!(html.contains(">Transaction IDs</dt>") && !html.contains(" hidden>"), "{html}");
        assert!(receipt_html(None).contains("id=\"receipt\" data-testid=\"receipt\" hidden>"));
        let none_confirmed = receipt_of("BTC", &payments[1..2], Timestamp(0));
        assert!(receipt_html(Some(&none_confirmed)).contains("<div id=\"receipt-txids-row\" hidden>"));
        let hostile = receipt_of("BTC", &[payment("<b>x</b>", "1", PaymentState::Confirmed, true)], Timestamp(0));
        assert!(receipt_html(Some(&hostile)).contains("&lt;b&gt;x&lt;/b&gt;"));
    }

    #[test]
    fn times_are_shown_in_utc_to_the_minute() {
        assert_eq!(time_text(Timestamp(1_795_326_682_123)), "2026-11-22 05:51 UTC");
        assert_eq!(time_text(Timestamp(0)), "1970-01-01 00:00 UTC");
    }
}
