"""Service.handle: the whole HTTP API and payment page as method, path, headers and body in."""

from __future__ import annotations

import ipaddress
import json
from decimal import Decimal

import pytest

import coinorder


def test_create_and_get_through_handle(svc: coinorder.Service, created_key: coinorder.CreatedKey) -> None:
    auth = {"x-api-key": created_key.plain_key, "content-type": "application/json"}
    created = svc.handle("POST", "/v1/orders", auth, '{"currency":"USD","amount":19.99,"merchant_order_id":"c-1"}')
    assert isinstance(created, coinorder.Response)
    assert created.status == 201
    assert created.headers["content-type"] == "application/json"
    assert isinstance(created.body, bytes)
    answer = created.json()
    assert answer == json.loads(created.body)
    assert answer["data"]["merchant_order_id"] == "c-1"
    assert json.loads(created.body, parse_float=Decimal)["data"]["amount"] == Decimal("19.99")
    exact = created.json(parse_float=Decimal)["data"]["amount"]
    assert (type(exact), exact) == (Decimal, Decimal("19.99"))
    assert b'"amount":19.99' in created.body
    order_id = answer["data"]["order_id"]

    again = svc.handle("POST", "/v1/orders", auth, b'{"currency":"USD","amount":19.99,"merchant_order_id":"c-1"}')
    assert (again.status, again.body) == (201, created.body)  # replayed byte for byte

    read = svc.handle("GET", f"/v1/orders/{order_id}", {"X-API-KEY": created_key.plain_key})
    assert read.status == 200
    assert read.json()["order"]["order_id"] == order_id

    listed = svc.handle("GET", "/v1/orders?limit=1", {"x-api-key": created_key.plain_key}, None)
    assert listed.json()["orders"][0]["order_id"] == order_id

    page = svc.handle("GET", f"/pay?id={order_id}")
    assert page.status == 200
    assert page.headers["content-type"].startswith("text/html")
    assert b"19.99" in page.body


def test_handle_answers_errors_as_the_api_does(svc: coinorder.Service) -> None:
    no_key = svc.handle("GET", "/v1/orders")
    assert no_key.status == 400
    assert no_key.json()["error_code"] == "AUTHENTICATION_FAILED"
    assert svc.handle("GET", "/v1/orders", {"x-api-key": "test_nope"}).status == 401
    assert svc.handle("DELETE", "/v1/orders").status == 404
    assert svc.handle("GET", "/elsewhere").json() == {
        "status": 404,
        "error_code": "Not Found",
        "error": "Page or action not found",
    }


def test_handle_on_a_live_service_has_no_simulate(db_path: str) -> None:
    with coinorder.Service.open(db_path, "live") as live:
        key = live.create_key(1).plain_key
        response = live.handle(
            "POST", "/v1/orders/00000000-0000-4000-8000-000000000000/simulate", {"x-api-key": key}, '{"action":"pay"}'
        )
        assert response.status == 404


def test_headers_are_a_mapping_or_pairs_and_a_bad_entry_is_named(
    svc: coinorder.Service, created_key: coinorder.CreatedKey
) -> None:
    assert svc.handle("GET", "/v1/orders", [("x-api-key", created_key.plain_key)]).status == 200
    # A name sent twice reaches the API twice (werkzeug's and Starlette's headers list
    # both in items(), as pairs do), and two keys are refused as over HTTP.
    twice = svc.handle("GET", "/v1/orders", [("x-api-key", created_key.plain_key), ("X-Api-Key", "test_other")])
    assert (twice.status, twice.json()["error"]) == (400, "x-api-key: sent more than once")
    with pytest.raises(TypeError, match="headers: must be a mapping"):
        svc.handle("GET", "/v1/orders", "x-api-key: test_x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="headers: every name and value must be a str; got .*'x-api-key', 1"):
        svc.handle("GET", "/v1/orders", {"x-api-key": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wsgi.version"):  # Django's request.META, say
        svc.handle("GET", "/v1/orders", {"wsgi.version": (1, 0)})  # type: ignore[arg-type]


def test_failed_authentications_are_limited_per_client_address(
    svc: coinorder.Service, created_key: coinorder.CreatedKey
) -> None:
    bad = {"x-api-key": "test_" + "x" * 40}
    # Without the client's address nothing can be counted against it.
    assert {svc.handle("GET", "/v1/orders", bad).status for _ in range(40)} == {401}
    answers = [svc.handle("GET", "/v1/orders", bad, client="203.0.113.7") for _ in range(40)]
    limited = [a for a in answers if a.status == 400]
    assert [a.status for a in answers[:20]] == [401] * 20  # the burst
    assert limited and limited[0].json()["error_code"] == "API_LIMIT_EXCEEDED"
    assert limited[0].headers["retry-after"] == "1"
    # Another address is not held back by that one's failures.
    good = {"x-api-key": created_key.plain_key}
    assert svc.handle("GET", "/v1/orders", good, client=ipaddress.ip_address("2001:db8::1")).status == 200
    # With a port, as some servers give it: the same address, its budget spent.
    assert svc.handle("GET", "/v1/orders", good, client="203.0.113.7:5000").status == 400
    # What is not an address (gunicorn's "" on a unix socket, a test client's name) is
    # an unknown one, never an error.
    for unknown in ("", "testclient"):
        assert {svc.handle("GET", "/v1/orders", bad, client=unknown).status for _ in range(25)} == {401}
    # Behind a proxy on this host: counted under the address it forwards, not its own.
    forwarded = {**bad, "x-forwarded-for": "198.51.100.4"}
    proxied = [svc.handle("GET", "/v1/orders", forwarded, client="127.0.0.1") for _ in range(25)]
    assert 400 in {a.status for a in proxied}
    assert {svc.handle("GET", "/v1/orders", bad, client="127.0.0.1").status for _ in range(25)} == {401}


def test_response_is_immutable(svc: coinorder.Service) -> None:
    response = svc.handle("GET", "/v1/orders")
    for name, value in (("status", 200), ("body", b"{}"), ("headers", {})):
        with pytest.raises(AttributeError):
            setattr(response, name, value)
    assert response.status == 400
    assert "Response" in repr(response)
    response.headers["content-type"] = "text/plain"
    response.headers.clear()
    assert response.headers["content-type"] == "application/json"


def test_order_status_members() -> None:
    names = ["NEW", "PENDING", "PAID", "EXPIRED", "FAILED", "CANCELLED"]
    assert [member.value for member in coinorder.OrderStatus] == names
    for name in names:
        member = coinorder.OrderStatus(name)
        assert member == name
        assert isinstance(member, str)
        assert {name: True}[member]  # hashes as its text, so it works as a dict key
    paid: str = coinorder.OrderStatus.PAID
    assert paid == "PAID"
    assert paid != "NEW"
