//! The hosted payment page (`/pay?id=<order_id>`) and its public JSON.
//!
//! PLACEHOLDER: the HTML is being written; `public_status` is final.

use serde_json::{json, Value};

use crate::error::Error;
use crate::money::to_json_number;
use crate::orders::{callback_redirect_url, OrderWithInvoice};
use crate::service::Service;

/// What the payment page may show about an order: no merchant ids, e-mails or webhook
/// URLs. `redirect_url` is set once the order is PAID or CANCELLED and has a callback_url.
pub fn public_status(service: &Service, current: &OrderWithInvoice) -> Value {
    let (order, invoice) = (&current.order, &current.invoice);
    let redirect = match order.status {
        crate::OrderStatus::Paid | crate::OrderStatus::Cancelled => callback_redirect_url(order),
        _ => None,
    };
    json!({
        "order_id": order.order_id,
        "title": order.title,
        "description": order.description,
        "status": order.status.as_str(),
        "price_amount": to_json_number(order.amount),
        "price_currency": order.currency,
        "pay_amount": to_json_number(invoice.amount),
        "pay_currency": invoice.currency,
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

/// The payment page for an order.
pub fn payment_page(service: &Service, current: &OrderWithInvoice) -> String {
    format!("<!doctype html><title>Pay</title><pre>{}</pre>", public_status(service, current))
}

/// The page shown for an unknown order id.
pub fn not_found_page() -> String {
    "<!doctype html><title>Order not found</title><h1>Order not found</h1>".to_string()
}

/// The page shown when the service fails.
pub fn error_page(_error: &Error) -> String {
    "<!doctype html><title>Error</title><h1>Something went wrong</h1>".to_string()
}
