"""The Flask example (examples/python/flask_app.py) through Flask's test client."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from flask.testing import FlaskClient

import coinorder
from flask_app import create_app


@pytest.fixture
def client(svc: coinorder.Service) -> FlaskClient:
    app = create_app(svc)
    app.testing = True
    return app.test_client()


def exact_json(data: bytes) -> Any:
    return json.loads(data, parse_float=Decimal)


def test_create_get_and_list_orders(client: FlaskClient, created_key: coinorder.CreatedKey) -> None:
    auth = {"x-api-key": created_key.plain_key}
    body = '{"merchant_order_id":"cart-7","currency":"USD","amount":19.99,"title":"T-shirt"}'
    created = client.post("/v1/orders", data=body, headers=auth, content_type="application/json")
    assert created.status_code == 201
    assert created.headers["content-type"] == "application/json"
    answer = exact_json(created.data)
    assert answer["status"] == 201
    assert answer["data"]["amount"] == Decimal("19.99")
    assert answer["data"]["status"] == "NEW"
    order_id = answer["data"]["order_id"]
    assert answer["payment_url"] == f"http://127.0.0.1:8080/pay?id={order_id}"

    replay = client.post("/v1/orders", data=body, headers=auth, content_type="application/json")
    assert (replay.status_code, replay.data) == (201, created.data)

    read = client.get(f"/v1/orders/{order_id}", headers=auth)
    assert read.status_code == 200
    got = exact_json(read.data)
    assert got["order"]["order_id"] == order_id
    assert got["order"]["price_amount"] == Decimal("19.99")
    assert got["invoice"]["order_id"] == order_id
    assert got["invoice"]["currency"] == "USDT"

    listed = client.get("/v1/orders?status=NEW&limit=5", headers=auth)
    assert listed.status_code == 200
    page = listed.get_json()
    assert [o["order_id"] for o in page["orders"]] == [order_id]
    assert (page["limit"], page["has_more"]) == (5, False)
    assert client.get("/v1/orders?status=PAID", headers=auth).get_json()["orders"] == []


def test_simulate_through_the_api(client: FlaskClient, created_key: coinorder.CreatedKey) -> None:
    auth = {"x-api-key": created_key.plain_key}
    order_id = client.post("/v1/orders", json={"currency": "EUR", "amount": "10"}, headers=auth).get_json()["data"][
        "order_id"
    ]
    paid = client.post(f"/v1/orders/{order_id}/simulate", json={"action": "pay"}, headers=auth)
    assert paid.status_code == 200
    assert paid.get_json()["order"]["status"] == "PAID"


def test_errors_come_back_as_the_api_answers_them(client: FlaskClient, created_key: coinorder.CreatedKey) -> None:
    no_key = client.get("/v1/orders")
    assert no_key.status_code == 400
    assert no_key.get_json()["error_code"] == "AUTHENTICATION_FAILED"
    bad_key = client.get("/v1/orders", headers={"X-Api-Key": "test_" + "x" * 40})
    assert (bad_key.status_code, bad_key.get_json()["error_code"]) == (401, "Unauthorized")
    auth = {"x-api-key": created_key.plain_key}
    zero = client.post("/v1/orders", json={"currency": "USD", "amount": 0}, headers=auth)
    assert zero.status_code == 400
    assert zero.get_json() == {
        "status": 400,
        "error_code": "PARAMETERS_MISSING",
        "error": "amount: must be greater than 0",
    }
    unknown = client.get("/v1/orders/00000000-0000-4000-8000-000000000000", headers=auth)
    assert (unknown.status_code, unknown.get_json()["error_code"]) == (400, "ORDER_NOT_VALID")
    nowhere = client.get("/v1/nothing-here", headers=auth)
    assert (nowhere.status_code, nowhere.get_json()["error_code"]) == (404, "Not Found")
    wrong_method = client.post("/v1/orders/00000000-0000-4000-8000-000000000000", headers=auth)
    assert wrong_method.status_code == 404
    # Methods and paths Flask would answer itself (405, OPTIONS, its HTML 404) get the
    # API's JSON 404, as from `coinorder serve`.
    for method in ("PUT", "PATCH", "DELETE", "OPTIONS"):
        answer = client.open("/v1/orders", method=method, headers=auth)
        assert (answer.status_code, answer.get_json()["error_code"]) == (404, "Not Found"), method
    assert client.get("/v1", headers=auth).get_json()["error_code"] == "Not Found"


def test_the_path_reaches_the_api_still_percent_encoded(
    svc: coinorder.Service, client: FlaskClient, created_key: coinorder.CreatedKey, merchant: coinorder.Merchant
) -> None:
    auth = {"x-api-key": created_key.plain_key}
    order_id = svc.create_order(merchant, currency="USD", amount=1).order.order_id
    # A decoded %3F would start a query, and %2F would reach another route.
    assert client.get("/v1/orders%3Fstatus=PAID", headers=auth).status_code == 404
    escaped = client.post(f"/v1/orders/{order_id}%2Fsimulate", headers=auth, json={"action": "cancel"})
    assert escaped.status_code in (400, 404)
    assert svc.get_order(merchant, order_id).order.status == "NEW"


def test_failed_authentications_are_limited_per_client(client: FlaskClient) -> None:
    bad = {"x-api-key": "test_" + "x" * 40}
    customer = {"REMOTE_ADDR": "203.0.113.5"}
    statuses = [client.get("/v1/orders", headers=bad, environ_base=customer).status_code for _ in range(30)]
    assert statuses[:20] == [401] * 20 and 400 in statuses[20:]
    elsewhere = client.get("/v1/orders", headers=bad, environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert elsewhere.status_code == 401
    # gunicorn on a unix socket gives an empty address: not an error, just not counted.
    assert client.get("/v1/orders", headers=bad, environ_base={"REMOTE_ADDR": ""}).status_code == 401


def test_an_app_mounted_under_a_prefix_is_routed_by_its_own_path(
    svc: coinorder.Service, created_key: coinorder.CreatedKey
) -> None:
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    from flask import Flask

    outer = Flask("outer")
    outer.wsgi_app = DispatcherMiddleware(outer.wsgi_app, {"/shop": create_app(svc)})  # type: ignore[method-assign]
    answer = outer.test_client().get("/shop/v1/orders", headers={"x-api-key": created_key.plain_key})
    assert answer.status_code == 200
    assert answer.get_json()["orders"] == []


def test_the_payment_page(svc: coinorder.Service, client: FlaskClient, merchant: coinorder.Merchant) -> None:
    created = svc.create_order(merchant, currency="USD", amount=Decimal("19.99"), title="T-shirt <Blue>")
    order_id = created.order.order_id
    page = client.get(f"/pay?id={order_id}")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["x-frame-options"] == "DENY"
    html = page.data.decode()
    assert html.lstrip().lower().startswith("<!doctype html>")
    assert "T-shirt &lt;Blue&gt;" in html and "<Blue>" not in html
    assert "19.99" in html
    assert created.invoice.address in html

    status = client.get(f"/pay/status?id={order_id}")
    assert status.status_code == 200
    assert status.get_json()["status"] == "NEW"
    assert status.get_json()["sandbox"] is True

    paid = client.post(f"/pay/simulate?id={order_id}")
    assert paid.status_code == 200
    assert paid.get_json()["status"] == "PAID"
    assert svc.get_order(merchant, order_id).order.status == "PAID"

    missing = client.get("/pay?id=00000000-0000-4000-8000-000000000000")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("text/html")


def test_the_payment_page_cancel(svc: coinorder.Service, client: FlaskClient, merchant: coinorder.Merchant) -> None:
    order_id = svc.create_order(merchant, currency="USD", amount=5).order.order_id
    cancelled = client.post(f"/pay/cancel?id={order_id}")
    assert (cancelled.status_code, cancelled.get_json()["status"]) == (200, "CANCELLED")
    again = client.post(f"/pay/cancel?id={order_id}")
    assert (again.status_code, again.get_json()["error_code"]) == (400, "ORDER_STATE_INVALID")
