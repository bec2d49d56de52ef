"""coinorder's HTTP API (/v1/...) and hosted payment page (/pay) as a plain ASGI app.

Serve it with any ASGI server (`uvicorn --factory --no-proxy-headers
asgi_app:from_environment`), or mount `make_app(svc)` under
/v1 and /pay in Starlette or FastAPI. No framework is needed: the request goes to
`Service.handle` as it came, and the call runs on a worker thread, so the event loop
keeps serving other requests while a write waits for the database.

`scope["client"]` must be the TCP peer: coinorder reads a proxy's X-Forwarded-For itself
(only from a peer on this host, from its end). uvicorn's own proxy-header handling
replaces the peer with an address the header names, and with `--forwarded-allow-ips '*'`
with the leftmost one, which the client wrote: turn it off (`--no-proxy-headers`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any

import coinorder

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]


def make_app(svc: coinorder.Service) -> App:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan and websocket messages: nothing to do
        # The path as sent, still percent-encoded (scope["path"] is decoded: a %3F in
        # an id would start a query), with the app's mount prefix (root_path) left out.
        raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
        root = scope.get("root_path", "").encode()
        if root and raw_path.startswith(root + b"/"):
            raw_path = raw_path[len(root) :]
        query: bytes = scope.get("query_string", b"")
        target = (raw_path + (b"?" + query if query else b"")).decode("latin-1")
        # Every header as a pair, so a header sent twice reaches the API twice.
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        client = scope.get("client")
        answer = await asyncio.to_thread(
            svc.handle, scope["method"], target, headers, body, client=client[0] if client else None
        )
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [(name.encode(), value.encode()) for name, value in answer.headers.items()],
            }
        )
        await send({"type": "http.response.body", "body": answer.body})

    return app


def from_environment() -> App:
    """`uvicorn --factory --no-proxy-headers asgi_app:from_environment`: a sandbox over the database named by
    COINORDER_DB (default shop.db), with expiry, webhooks and e-mails in the background."""
    svc = coinorder.Service.open(os.environ.get("COINORDER_DB", "shop.db"))
    svc.start_workers()
    return make_app(svc)
