//! The hosted payment page (`/pay?id=<order_id>`) and its public JSON.
//!
//! The page is one self-contained HTML document: inline CSS and script, the QR code as
//! inline SVG rendered here, no external assets (it works offline and under a strict
//! content security policy). Everything is rendered server-side from the same public
//! fields `/pay/status` returns, so the page reads correctly without JavaScript; the
//! script adds the live countdown, polls `/pay/status`, drives the buttons and follows
//! `redirect_url` once the order is PAID or CANCELLED.

use qrcode::render::svg;
use qrcode::{EcLevel, QrCode};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::error::Error;
use crate::money::to_json_number;
use crate::orders::{callback_redirect_url, OrderWithInvoice};
use crate::service::Service;
use crate::OrderStatus;

/// What the payment page may show about an order: no merchant ids, e-mails or webhook
/// URLs. `redirect_url` is set once the order is PAID or CANCELLED and has a callback_url.
/// `due_amount` is the crypto amount still to send (the invoice amount less the payments
/// that count and are not rejected; `null` if the payments cannot be read).
pub fn public_status(service: &Service, current: &OrderWithInvoice) -> Value {
    let (order, invoice) = (&current.order, &current.invoice);
    let due = service.amount_due(&order.order_id).ok().map(to_json_number);
    let redirect = callback_redirect_url(order);
    json!({
        "order_id": order.order_id,
        "title": order.title,
        "description": order.description,
        "status": order.status.as_str(),
        "price_amount": to_json_number(order.amount),
        "price_currency": order.currency,
        "pay_amount": to_json_number(invoice.amount),
        "pay_currency": invoice.currency,
        "due_amount": due,
        "address": invoice.address,
        "payment_uri": invoice.payment_uri,
        "receive_amount": to_json_number(invoice.receive_amount),
        "receive_currency": invoice.receive_currency,
        "expired_at": invoice.expired_at.to_iso(),
        "expired_at_t": invoice.expired_at.as_millis(),
        "now_t": service.now().as_millis(),
        "sandbox": service.environment() == crate::Environment::Sandbox,
        "redirect_url": redirect,
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

fn status_text(status: OrderStatus) -> (&'static str, &'static str) {
    STATUS_TEXT
        .iter()
        .find(|(name, _, _)| *name == status.as_str())
        .map_or(("", ""), |(_, badge, detail)| (*badge, *detail))
}

/// Shows a fiat amount with its currency's minor unit (`10` USD -> `10.00`) and thousands
/// separators.
fn fiat_text(amount: Decimal, currency: &str) -> String {
    let mut amount = amount;
    if let Ok(minor) = crate::money::fiat_minor_units("currency", currency) {
        if amount.scale() < minor {
            amount.rescale(minor);
        }
    }
    let text = amount.to_string();
    let (sign, digits) = text.strip_prefix('-').map_or(("", text.as_str()), |rest| ("-", rest));
    let (whole, fraction) = digits.split_once('.').map_or((digits, ""), |(w, f)| (w, f));
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if fraction.is_empty() {
        format!("{sign}{grouped}")
    } else {
        format!("{sign}{grouped}.{fraction}")
    }
}

/// The minor-unit count of a fiat currency, for the script's formatting.
fn fiat_decimals(currency: &str) -> u32 {
    crate::money::fiat_minor_units("currency", currency).unwrap_or(2)
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

/// The payment page for an order.
pub fn payment_page(service: &Service, current: &OrderWithInvoice) -> String {
    let (order, invoice) = (&current.order, &current.invoice);
    let status = order.status;
    let sandbox = service.environment() == crate::Environment::Sandbox;
    let terminal = status.is_terminal();
    let due = service.amount_due(&current.order.order_id).unwrap_or(invoice.amount);
    let all_sent = due.is_zero() && status == OrderStatus::Pending;
    let partly = !due.is_zero() && due < invoice.amount;
    let (badge, detail) = if partly && status == OrderStatus::Pending { PARTLY_PAID } else { status_text(status) };
    let title = order.title.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or("Payment");
    let fiat = fiat_text(order.amount, &order.currency);
    let crypto = invoice.amount.normalize().to_string();
    let left_ms = invoice.expired_at.as_millis() - service.now().as_millis();
    let hidden = |hide: bool| if hide { " hidden" } else { "" };

    let data = public_status(service, current);
    let labels: serde_json::Map<String, Value> = STATUS_TEXT
        .iter()
        .map(|(name, badge, detail)| ((*name).to_string(), json!({"badge": badge, "detail": detail})))
        .collect();
    let config = json!({
        "labels": labels,
        "partly_paid": {"badge": PARTLY_PAID.0, "detail": PARTLY_PAID.1},
        "fiat_decimals": fiat_decimals(&order.currency),
    });

    let mut body = String::with_capacity(16 * 1024);
    if sandbox {
        body.push_str(
            "<div class=\"banner\" id=\"sandbox-banner\" data-testid=\"sandbox-banner\" role=\"note\">\
             <strong>SANDBOX</strong> \u{2014} test mode: no real coins move, the buttons below simulate the customer.\
             </div>",
        );
    }
    body.push_str("<main class=\"wrap\"><article class=\"card\" aria-labelledby=\"merchant-title\">");

    // Header: merchant title, description, state.
    body.push_str("<header class=\"head\"><p class=\"eyebrow\">Pay with crypto</p>");
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
        "<p class=\"detail\" id=\"status-detail\" data-testid=\"status-detail\">{}</p>",
        escape_html(detail)
    ));
    body.push_str("</header>");

    // What to pay and where: hidden once the order is over or everything due was sent.
    let due_text = due.normalize().to_string();
    body.push_str(&format!(
        "<section class=\"pay{}\" id=\"pay-panel\" data-testid=\"pay-panel\"{}>",
        if partly { " no-qr" } else { "" },
        hidden(terminal || all_sent)
    ));
    body.push_str("<div class=\"details\">");
    body.push_str(&format!(
        "<div class=\"field\"><span class=\"label\" id=\"amount-label\">{label}</span>\
         <div class=\"value-row\"><span class=\"amount\"><span id=\"crypto-amount\" data-testid=\"crypto-amount\">{due}</span> \
         <span id=\"pay-currency\" data-testid=\"pay-currency\" class=\"coin\">{coin}</span></span>\
         <button type=\"button\" class=\"copy\" id=\"copy-amount\" data-testid=\"copy-amount\" data-copy=\"{due}\" \
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
    if invoice.address.is_empty() {
        body.push_str(
            "<div class=\"field\"><span class=\"label\">Deposit address</span>\
             <p class=\"sub\" id=\"address-missing\">The deposit address is not available yet.</p></div>",
        );
    } else {
        body.push_str(&format!(
            "<div class=\"field\"><span class=\"label\">Send {coin} to this address</span>\
             <div class=\"address-box\"><code id=\"address\" data-testid=\"address\">{address}</code>\
             <button type=\"button\" class=\"copy\" id=\"copy-address\" data-testid=\"copy-address\" data-copy=\"{address}\" \
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
    body.push_str("<figure class=\"qr\" id=\"qr\" data-testid=\"qr\">");
    match qr_svg(&invoice.payment_uri) {
        Some(svg) => {
            body.push_str(&format!(
                "<div class=\"qr-frame\">{svg}</div><figcaption>Scan with your wallet app</figcaption>"
            ));
            if let Some(link) = wallet_link(&invoice.payment_uri) {
                body.push_str(&link);
            }
        }
        None => body.push_str("<figcaption>No QR code: the deposit address is not available yet.</figcaption>"),
    }
    body.push_str("</figure></section>");

    // The outcome, once there is one (or the wait for confirmations once all was sent).
    let icon = match status {
        OrderStatus::Paid => "\u{2713}",
        OrderStatus::Cancelled | OrderStatus::Failed => "\u{2715}",
        OrderStatus::Pending | OrderStatus::New => "\u{2026}",
        OrderStatus::Expired => "!",
    };
    body.push_str(&format!(
        "<section class=\"result\" id=\"result\" data-testid=\"result\" data-status=\"{s}\"{h}>\
         <div class=\"result-icon\" id=\"result-icon\" aria-hidden=\"true\">{icon}</div>\
         <h2 id=\"result-title\" data-testid=\"result-title\">{badge}</h2>\
         <p class=\"redirect-note\" id=\"redirect-note\" data-testid=\"redirect-note\" hidden>Returning you to the merchant\u{2026}</p>\
         </section>",
        s = status.as_str(),
        h = hidden(!(terminal || all_sent)),
        badge = escape_html(badge),
    ));

    // Errors and buttons.
    body.push_str(
        "<div class=\"error\" id=\"error\" data-testid=\"error\" role=\"alert\" hidden></div>\
         <p class=\"offline\" id=\"offline\" data-testid=\"offline\" hidden>Connection lost \u{2014} retrying\u{2026}</p>",
    );
    body.push_str(&format!(
        "<div class=\"actions\" id=\"actions\">\
         <button type=\"button\" class=\"btn primary\" id=\"simulate-pay\" data-testid=\"simulate-pay\"{sim}>Simulate payment</button>\
         <button type=\"button\" class=\"btn secondary\" id=\"cancel\" data-testid=\"cancel\"{cancel}>Cancel</button>\
         </div>",
        sim = hidden(!(sandbox && matches!(status, OrderStatus::New | OrderStatus::Pending) && !all_sent)),
        cancel = hidden(status != OrderStatus::New),
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

    let head_title = format!("{title} \u{2014} {crypto} {}", invoice.currency);
    document(&head_title, &body)
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

/// The HTML document around a page body: inline style, strict CSP (nothing loads from
/// anywhere; the script may only call back to this server).
fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; \
         script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'\">\
         <meta name=\"referrer\" content=\"no-referrer\"><meta name=\"robots\" content=\"noindex\">\
         <title>{}</title><style>{PAGE_STYLE}</style></head><body>{body}</body></html>\n",
        escape_html(title)
    )
}

const PAGE_STYLE: &str = r#"
:root{--bg:#f3f4f8;--card:#fff;--text:#101828;--muted:#5d6679;--line:#e5e7ee;--soft:#f7f8fb;
--accent:#4338ca;--accent-2:#3730a3;--ok:#067647;--ok-bg:#dcfae6;--warn:#b54708;--warn-bg:#fef0c7;
--bad:#b42318;--bad-bg:#fee4e2;--info:#175cd3;--info-bg:#d1e9ff;color-scheme:light}
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
.card{background:var(--card);border:1px solid var(--line);border-radius:18px;
box-shadow:0 1px 2px rgba(16,24,40,.05),0 12px 32px -8px rgba(16,24,40,.12);overflow:hidden}
.head{padding:28px 32px 20px;border-bottom:1px solid var(--line)}
.eyebrow{margin:0 0 4px;font-size:12px;font-weight:600;letter-spacing:.08em;text-transform:uppercase;color:var(--muted)}
h1{margin:0;font-size:26px;line-height:1.25;font-weight:700;overflow-wrap:anywhere}
.desc{margin:6px 0 0;color:var(--muted);overflow-wrap:anywhere}
.status-row{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:10px;margin-top:16px}
.price{font-size:22px;font-weight:700;font-variant-numeric:tabular-nums;white-space:nowrap}
.pill{display:inline-flex;align-items:center;gap:7px;padding:5px 12px;border-radius:999px;font-size:14px;font-weight:600;
background:var(--info-bg);color:var(--info)}
.pill::before{content:"";width:8px;height:8px;border-radius:50%;background:currentColor}
.pill[data-status=NEW]::before,.pill[data-status=PENDING]::before{animation:pulse 1.6s ease-in-out infinite}
.pill[data-status=PENDING]{background:var(--warn-bg);color:var(--warn)}
.pill[data-status=PAID]{background:var(--ok-bg);color:var(--ok)}
.pill[data-status=EXPIRED],.pill[data-status=CANCELLED]{background:#eaecf0;color:#475467}
.pill[data-status=FAILED]{background:var(--bad-bg);color:var(--bad)}
@keyframes pulse{50%{opacity:.35}}
.detail{margin:10px 0 0;color:var(--muted);font-size:15px}
.pay{display:grid;grid-template-columns:minmax(0,1fr) 232px;gap:28px;padding:24px 32px;align-items:start}
.field{margin-bottom:18px}
.label{display:block;font-size:13px;font-weight:600;color:var(--muted);margin-bottom:6px}
.value-row{display:flex;align-items:center;gap:10px;flex-wrap:wrap}
.amount{font-size:24px;font-weight:700;font-variant-numeric:tabular-nums;overflow-wrap:anywhere}
.coin{color:var(--accent)}
.sub{display:block;color:var(--muted);font-size:14px;margin:2px 0 0}
.address-box{display:flex;align-items:stretch;border:1px solid var(--line);border-radius:12px;background:var(--soft);overflow:hidden}
.address-box code{flex:1;min-width:0;padding:11px 12px;font-size:14px;line-height:1.45;word-break:break-all;user-select:all}
.address-box .copy{border:0;border-left:1px solid var(--line);border-radius:0}
.copy{flex:none;font:inherit;font-size:13px;font-weight:600;padding:6px 12px;border:1px solid var(--line);border-radius:8px;
background:#fff;color:var(--accent);cursor:pointer}
.copy:hover{background:#eef0ff}
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
.wallet-link{display:inline-block;margin-top:10px;padding:6px 14px;border:1px solid #c7d2fe;border-radius:999px;
font-size:13px;font-weight:600;color:var(--accent);text-decoration:none;background:#f5f7ff}
.wallet-link:hover{background:#eef0ff}
.pay.no-qr{grid-template-columns:1fr}
.pay.no-qr .qr{display:none}
.result{padding:36px 32px 12px;text-align:center}
.result-icon{width:64px;height:64px;margin:0 auto 12px;border-radius:50%;display:flex;align-items:center;justify-content:center;
font-size:32px;font-weight:700;background:#eaecf0;color:#475467}
.result[data-status=PAID] .result-icon{background:var(--ok-bg);color:var(--ok)}
.result[data-status=FAILED] .result-icon{background:var(--bad-bg);color:var(--bad)}
.result[data-status=PENDING] .result-icon{background:var(--warn-bg);color:var(--warn);animation:pulse 1.6s ease-in-out infinite}
.result h2{margin:0;font-size:24px}
.redirect-note{color:var(--muted);margin:8px 0 0}
.error{margin:0 32px 16px;padding:11px 14px;border-radius:12px;background:var(--bad-bg);color:var(--bad);font-size:14px;
border:1px solid #fecdca}
.offline{margin:0 32px 16px;color:var(--warn);font-size:14px}
.actions{display:flex;gap:12px;padding:0 32px 24px}
.actions:not(:has(.btn:not([hidden]))){display:none}
.btn{flex:1;font:inherit;font-weight:600;font-size:16px;padding:13px 18px;border-radius:12px;cursor:pointer;
border:1px solid transparent;transition:background .15s,opacity .15s}
.btn.primary{background:var(--accent);color:#fff}
.btn.primary:hover{background:var(--accent-2)}
.btn.secondary{flex:0 1 auto;min-width:120px;background:#fff;color:var(--text);border-color:#d0d5dd}
.btn.secondary:hover{background:var(--soft)}
.btn:disabled{opacity:.55;cursor:progress}
.btn:focus-visible,.copy:focus-visible,.wallet-link:focus-visible{outline:3px solid #a5b4fc;outline-offset:2px}
.foot{display:flex;gap:8px;align-items:baseline;padding:14px 32px;border-top:1px solid var(--line);background:var(--soft);
font-size:12px;color:var(--muted)}
.foot code{overflow-wrap:anywhere}
.powered{text-align:center;font-size:12px;color:#98a2b3;margin:16px 0 0}
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
.foot{padding:12px 20px}
.result{padding:28px 20px 8px}
.message{margin-top:16px;padding:32px 20px}
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

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function left(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return (h > 0 ? h + ":" + pad(m) : pad(m)) + ":" + pad(sec);
  }
  function money(value) {
    var n = Number(value);
    return isFinite(n) ? n.toLocaleString("en-US", {
      minimumFractionDigits: config.fiat_decimals, maximumFractionDigits: config.fiat_decimals }) : String(value);
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
    $("simulate-pay").disabled = off;
    $("cancel").disabled = off;
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
  // 18 decimals exactly. Numbers there are plain decimals (never exponents).
  function amountText(raw, name) {
    var m = new RegExp('"' + name + '":(-?[0-9][0-9.]*)').exec(raw);
    return m ? m[1] : null;
  }

  function apply(next, raw) {
    data = next;
    skew = Date.now() - next.now_t;
    var st = next.status, terminal = !!TERMINAL[st];
    var total = amountText(raw, "pay_amount") || String(next.pay_amount);
    var due = amountText(raw, "due_amount") || total;
    var allSent = st === "PENDING" && Number(due) === 0;
    var partly = Number(due) > 0 && due !== total;
    var label = (partly && st === "PENDING" ? config.partly_paid : config.labels[st]) || { badge: st, detail: "" };
    document.body.setAttribute("data-status", st);
    var pill = $("status");
    pill.textContent = label.badge;
    pill.setAttribute("data-status", st);
    $("status-detail").textContent = label.detail;

    var panel = $("pay-panel");
    panel.hidden = terminal || allSent;
    panel.classList.toggle("no-qr", partly);
    $("amount-label").textContent = partly ? "Amount still due" : "Amount to send";
    $("crypto-amount").textContent = due;
    $("copy-amount").setAttribute("data-copy", due);
    $("amount-sub").textContent = partly ? "of " + total + " " + next.pay_currency + " in total"
      : "\u2248 " + money(next.price_amount) + " " + next.price_currency;
    var got = Number(next.receive_amount) > 0 && next.receive_currency;
    $("received").hidden = !got || terminal;
    if (got) {
      $("received-amount").textContent = money(next.receive_amount) + " of " + money(next.price_amount) + " " + next.price_currency;
    }

    var result = $("result");
    result.hidden = !(terminal || allSent);
    result.setAttribute("data-status", st);
    $("result-title").textContent = label.badge;
    $("result-icon").textContent = st === "PAID" ? "\u2713" : (st === "CANCELLED" || st === "FAILED") ? "\u2715"
      : st === "EXPIRED" ? "!" : "\u2026";
    $("simulate-pay").hidden = !(next.sandbox && (st === "NEW" || st === "PENDING") && !allSent);
    $("cancel").hidden = st !== "NEW";
    tick();
    if (next.redirect_url && safeUrl(next.redirect_url) && !redirecting) {
      redirecting = true;
      finished = true;
      clearTimeout(pollTimer);
      $("redirect-note").hidden = false;
      setButtons();
      window.location.assign(next.redirect_url);
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
        if (res.ok) apply(res.body, res.raw);
        else showError(res.body.error || "The request failed.", res.body.error_code);
      })
      .catch(function () {
        busy = false;
        showError("The server could not be reached. Please try again.");
      })
      .then(function () { setButtons(); });
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
  $("cancel").addEventListener("click", function () { act("cancel"); });
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
    fn fiat_amounts_use_the_minor_unit_and_group_thousands() {
        assert_eq!(fiat_text(Decimal::new(10, 0), "USD"), "10.00");
        assert_eq!(fiat_text(Decimal::new(123_456_789, 1), "USD"), "12,345,678.90");
        assert_eq!(fiat_text(Decimal::new(1500, 0), "JPY"), "1,500");
        assert_eq!(fiat_text(Decimal::new(1, 3), "KWD"), "0.001");
        assert_eq!(fiat_text(Decimal::new(100, 0), "USD"), "100.00");
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
}
