"""The ASGI example (examples/python/asgi_app.py), driven through the ASGI protocol itself."""

from __future__ import annotations

import asyncio
import json
import threading
from decimal import Decimal
from typing import Any

import coinorder
from asgi_app import Message, make_app


def call(
    svc: coinorder.Service,
    method: str,
    raw_path: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    query: bytes = b"",
    client: tuple[str, int] | None = ("203.0.113.20", 5000),
    root_path: str = "",
) -> tuple[int, dict[str, str], bytes]:
    """One request through the app as an ASGI server makes it: the body in two parts."""
    scope: dict[str, Any] = {
        "type": "http",
        "method": method,
        "path": raw_path.decode(),
        "raw_path": raw_path,
        "root_path": root_path,
        "query_string": query,
        "headers": headers,
        "client": client,
    }
    parts: list[Message] = [
        {"type": "http.request", "body": body[:5], "more_body": True},
        {"type": "http.request", "body": body[5:]},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return parts.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(make_app(svc)(scope, receive, send))
    start, body_message = sent
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body_message["body"]


def test_create_and_read_through_the_asgi_app(svc: coinorder.Service, created_key: coinorder.CreatedKey) -> None:
    auth = [(b"x-api-key", created_key.plain_key.encode()), (b"content-type", b"application/json")]
    status, headers, body = call(svc, "POST", b"/v1/orders", auth, b'{"currency":"USD","amount":19.99}')
    assert (status, headers["content-type"]) == (201, "application/json")
    order_id = json.loads(body)["data"]["order_id"]
    status, _, body = call(svc, "GET", f"/v1/orders/{order_id}".encode(), auth)
    assert status == 200
    assert json.loads(body, parse_float=Decimal)["order"]["price_amount"] == Decimal("19.99")
    # Mounted under a prefix, it routes by its own path.
    status, _, _ = call(svc, "GET", f"/shop/v1/orders/{order_id}".encode(), auth, root_path="/shop")
    assert status == 200
    # The query goes through as sent; an encoded ? in the path stays in the path.
    status, _, body = call(svc, "GET", b"/v1/orders", auth, query=b"status=PAID")
    assert (status, json.loads(body)["orders"]) == (200, [])
    assert call(svc, "GET", b"/v1/orders%3Fstatus=PAID", auth)[0] == 404
    # A header sent twice reaches the API twice.
    twice = auth + [(b"x-api-key", b"test_other")]
    assert call(svc, "GET", b"/v1/orders", twice)[0] == 400


def test_failed_authentications_are_limited_per_client(svc: coinorder.Service) -> None:
    bad = [(b"x-api-key", b"test_" + b"x" * 40)]
    statuses = [call(svc, "GET", b"/v1/orders", bad)[0] for _ in range(25)]
    assert statuses[:20] == [401] * 20 and 400 in statuses[20:]
    assert call(svc, "GET", b"/v1/orders", bad, client=None)[0] == 401


def test_the_call_runs_off_the_event_loop(svc: coinorder.Service, created_key: coinorder.CreatedKey) -> None:
    threads: list[str] = []
    handle = svc.handle

    class Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(svc, name)

        def handle(self, *args: Any, **kwargs: Any) -> coinorder.Response:
            threads.append(threading.current_thread().name)
            return handle(*args, **kwargs)

    call(Recording(), "GET", b"/v1/orders", [(b"x-api-key", created_key.plain_key.encode())])  # type: ignore[arg-type]
    assert threads and threads[0] != threading.main_thread().name
