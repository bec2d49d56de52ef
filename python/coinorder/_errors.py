"""The exception classes of coinorder and the order states.

Every failure of the service raises a subclass of :class:`Error`, one per error code of
the HTTP API, carrying the same ``error_code``, ``http_status`` and ``message`` that the
API would answer with. (The compiled module raises these; they live in Python so that
they are ordinary, picklable exception classes.)
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

__all__ = [
    "Error",
    "ParametersMissing",
    "ApiLimitExceeded",
    "AuthenticationFailed",
    "Unauthorized",
    "OrderNotValid",
    "OrderDuplicate",
    "OrderStateInvalid",
    "KeyNotFound",
    "PaymentNotFound",
    "NotFound",
    "InternalError",
    "ServiceUnavailable",
    "EventNotFound",
    "WebhookVerificationError",
    "OrderStatus",
]


class Error(Exception):
    """A coinorder failure: ``error_code`` (the API's string), ``http_status``, ``message``,
    and ``retry_after``: the seconds to wait before calling again when waiting helps (a
    key over its rate limit, a database busy past its timeout; what the HTTP API sends as
    ``Retry-After``), else ``None``."""

    error_code: str = "InternalServerError"
    http_status: int = 500
    retry_after: int | None = None

    def __init__(
        self,
        message: str,
        error_code: str | None = None,
        http_status: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if error_code is not None:
            self.error_code = error_code
        if http_status is not None:
            self.http_status = http_status
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[type[Error], tuple[str, str, int, int | None]]:
        return (type(self), (self.message, self.error_code, self.http_status, self.retry_after))


class ParametersMissing(Error):
    """A field is missing or breaks a rule (``PARAMETERS_MISSING``, 400); the message names it."""

    error_code = "PARAMETERS_MISSING"
    http_status = 400


class ApiLimitExceeded(Error):
    """A size limit or the key's rate limit was exceeded (``API_LIMIT_EXCEEDED``, 400)."""

    error_code = "API_LIMIT_EXCEEDED"
    http_status = 400


class AuthenticationFailed(Error):
    """No API key, or an inactive one (``AUTHENTICATION_FAILED``, 400)."""

    error_code = "AUTHENTICATION_FAILED"
    http_status = 400


class Unauthorized(Error):
    """An unknown, deleted, malformed or other-environment key (``Unauthorized``, 401)."""

    error_code = "Unauthorized"
    http_status = 401


class OrderNotValid(Error):
    """No such order for this merchant and environment (``ORDER_NOT_VALID``, 400)."""

    error_code = "ORDER_NOT_VALID"
    http_status = 400


class OrderDuplicate(Error):
    """The merchant_order_id belongs to a different order (``ORDER_DUPLICATE``, 400)."""

    error_code = "ORDER_DUPLICATE"
    http_status = 400


class OrderStateInvalid(Error):
    """The payment state machine refuses the change (``ORDER_STATE_INVALID``, 400)."""

    error_code = "ORDER_STATE_INVALID"
    http_status = 400


class KeyNotFound(Error):
    """No API key with that id (``KEY_NOT_FOUND``, 400)."""

    error_code = "KEY_NOT_FOUND"
    http_status = 400


class PaymentNotFound(Error):
    """No payment with that transaction id (``PAYMENT_NOT_FOUND``, 400)."""

    error_code = "PAYMENT_NOT_FOUND"
    http_status = 400


class NotFound(Error):
    """No such route, or simulation on a live service (``Not Found``, 404)."""

    error_code = "Not Found"
    http_status = 404


class InternalError(Error):
    """The service itself failed (``InternalServerError``, 500)."""

    error_code = "InternalServerError"
    http_status = 500


class EventNotFound(Error):
    """No event with that id in this environment (``EVENT_NOT_FOUND``, 400)."""

    error_code = "EVENT_NOT_FOUND"
    http_status = 400


class ServiceUnavailable(Error):
    """The database stayed locked by another writer past the busy timeout; nothing was
    done and the call may be made again (``ServiceUnavailable``, 503)."""

    error_code = "ServiceUnavailable"
    http_status = 503


class WebhookVerificationError(Error):
    """A received webhook is not authentic or not fresh (``SIGNATURE_INVALID``, 400)."""

    error_code = "SIGNATURE_INVALID"
    http_status = 400


class OrderStatus(str, enum.Enum):
    """An order's (and its invoice's) state; each member equals its spec text (``"PAID"``)."""

    NEW = "NEW"
    PENDING = "PENDING"
    PAID = "PAID"
    EXPIRED = "EXPIRED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    if TYPE_CHECKING:
        # For type checkers (and stubtest, which reads this file as the stub): members are
        # looked up by value, as Enum does at run time, not built like a `str`.
        def __new__(cls, value: str) -> OrderStatus: ...

    def __str__(self) -> str:
        return self.value
