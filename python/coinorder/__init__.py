"""coinorder: the embeddable crypto-payment order engine, for Python.

The whole ``/v1/orders`` order service in-process over one SQLite file: API keys, orders
priced in fiat and paid in crypto, invoices with quotes and expiry, the payment state
machine, signed webhooks and the HTTP API (``Service.handle``) for any web framework.

    import coinorder
    from decimal import Decimal

    with coinorder.Service.open("shop.db") as svc:
        created = svc.create_key(user_id=1)
        merchant = svc.authenticate(created.plain_key)
        order = svc.create_order(merchant, currency="USD", amount=Decimal("19.99"))
        print(order.payment_url)

Money is ``decimal.Decimal`` both ways; timestamps are aware UTC ``datetime``s; failures
raise subclasses of :class:`coinorder.Error`.
"""

from ._coinorder import (
    ApiKey,
    ChainWatchReport,
    CreatedKey,
    CreatedOrder,
    DeliveryReport,
    EmailReport,
    Event,
    EventDelivery,
    ExpiryReport,
    Invoice,
    Merchant,
    Order,
    OrderPage,
    OrderWithInvoice,
    Payment,
    PaymentOutcome,
    Rate,
    Response,
    Service,
    Simulation,
    Wallet,
    WebhookAttempt,
    __version__,
    verify_webhook,
)
from ._errors import (
    ApiLimitExceeded,
    AuthenticationFailed,
    Error,
    EventNotFound,
    InternalError,
    KeyNotFound,
    NotFound,
    OrderDuplicate,
    OrderNotValid,
    OrderStateInvalid,
    OrderStatus,
    ParametersMissing,
    PaymentNotFound,
    ServiceUnavailable,
    Unauthorized,
    WebhookVerificationError,
)

__all__ = [
    "ApiKey",
    "ApiLimitExceeded",
    "AuthenticationFailed",
    "ChainWatchReport",
    "CreatedKey",
    "CreatedOrder",
    "DeliveryReport",
    "EmailReport",
    "Error",
    "Event",
    "EventDelivery",
    "EventNotFound",
    "ExpiryReport",
    "InternalError",
    "Invoice",
    "KeyNotFound",
    "Merchant",
    "NotFound",
    "Order",
    "OrderDuplicate",
    "OrderNotValid",
    "OrderPage",
    "OrderStateInvalid",
    "OrderStatus",
    "OrderWithInvoice",
    "ParametersMissing",
    "Payment",
    "PaymentNotFound",
    "PaymentOutcome",
    "Rate",
    "Response",
    "Service",
    "ServiceUnavailable",
    "Simulation",
    "Unauthorized",
    "Wallet",
    "WebhookAttempt",
    "WebhookVerificationError",
    "__version__",
    "verify_webhook",
]
