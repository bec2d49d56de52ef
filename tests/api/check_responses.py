"""Real requests against a running `coinorder serve --env sandbox`, one for each documented
kind of answer, each checked against openapi.yaml: the status is documented for the
operation, the content type is the documented one, the documented headers are present and
the body validates against the documented schema (JSON Schema 2020-12, formats checked).

Run by scripts/test-api:  python check_responses.py BASE_URL API_KEY OPENAPI_YAML

Prints one line per check, "ok - name" or "not ok - name: reason"; exits 1 if any failed.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any, Callable

import requests
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

BASE, KEY, SPEC_PATH = sys.argv[1], sys.argv[2], sys.argv[3]
with open(SPEC_PATH, encoding="utf-8") as spec_file:
    SPEC_TEXT = spec_file.read()
SPEC: dict[str, Any] = yaml.safe_load(SPEC_TEXT)
SPEC_URI = "urn:coinorder:openapi"
REGISTRY: Registry[Any] = Registry().with_resource(SPEC_URI, DRAFT202012.create_resource(SPEC))

session = requests.Session()
results = {"passed": 0, "failed": 0}


def pointer(path: list[str]) -> str:
    return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path)


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follows a local `$ref` (responses, headers) to the object it names."""
    while "$ref" in node:
        target: Any = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def check_against_spec(path: str, method: str, response: requests.Response) -> None:
    """Raises AssertionError naming what in `response` breaks the documented contract."""
    operation = SPEC["paths"][path][method]
    status = str(response.status_code)
    assert status in operation["responses"], f"status {status} is not documented for {method.upper()} {path}"
    documented = resolve(operation["responses"][status])
    for name, header in documented.get("headers", {}).items():
        header = resolve(header)
        value = response.headers.get(name)
        if header.get("required"):
            assert value is not None, f"header {name} missing"
        if value is not None:
            errors = list(Draft202012Validator(header["schema"]).iter_errors(value))
            assert not errors, f"header {name}: {errors[0].message}"
    media_type = response.headers.get("content-type", "").split(";")[0].strip()
    content = documented.get("content", {})
    assert media_type in content, f"content type {media_type!r} not documented (documented: {sorted(content)})"
    if media_type == "application/json":
        body: Any = response.json()
    elif media_type == "application/yaml":
        body = yaml.safe_load(response.text)
    else:
        body = response.text
    # Validate in place inside the document, so every `$ref` resolves as it does there.
    location = ["paths", path, method, "responses", status]
    response_ref = operation["responses"][status].get("$ref")
    if response_ref:
        location = response_ref.removeprefix("#/").split("/")
    location += ["content", media_type, "schema"]
    validator = Draft202012Validator(
        {"$ref": SPEC_URI + pointer(location)},
        registry=REGISTRY,
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(body)"
        raise AssertionError(f"body at {where}: {first.message[:300]}")


def step(
    name: str,
    path: str,
    method: str,
    call: Callable[[], requests.Response],
    want: int,
    expect: Callable[[requests.Response], None] | None = None,
) -> requests.Response | None:
    """One documented answer: the request, its status, the contract, and any extra checks."""
    try:
        response = call()
        assert response.status_code == want, f"status {response.status_code}, want {want}: {response.text[:300]}"
        check_against_spec(path, method, response)
        if expect:
            expect(response)
    except Exception as error:  # noqa: BLE001 - every failure is reported the same way
        results["failed"] += 1
        reason = str(error).replace("\n", " ") or type(error).__name__
        print(f"not ok - {name}: {reason}", flush=True)
        return None
    results["passed"] += 1
    print(f"ok - {name}", flush=True)
    return response


def key_headers(key: str | None = KEY) -> dict[str, str]:
    return {} if key is None else {"x-api-key": key}


def post_order(body: Any, key: str | None = KEY) -> requests.Response:
    return session.post(f"{BASE}/v1/orders", json=body, headers=key_headers(key), timeout=10)


def require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def error_code(code: str) -> Callable[[requests.Response], None]:
    def check(response: requests.Response) -> None:
        body = response.json()
        assert body["error_code"] == code, f"error_code {body['error_code']!r}, want {code!r}"
        assert body["status"] == response.status_code, "status member differs from the HTTP status"
        if code == "ORDER_NOT_VALID":
            assert body["eror"] == body["error"], "eror differs from error"

    return check


def all_of(*checks: Callable[[requests.Response], None]) -> Callable[[requests.Response], None]:
    def check(response: requests.Response) -> None:
        for one in checks:
            one(response)

    return check


def member(pointer_path: str, want: Any) -> Callable[[requests.Response], None]:
    def check(response: requests.Response) -> None:
        value: Any = response.json()
        for part in pointer_path.split("/"):
            value = value[int(part)] if isinstance(value, list) else value[part]
        assert value == want, f"{pointer_path} is {value!r}, want {want!r}"

    return check


# ----- The meta route -----
step(
    "GET /openapi.yaml: 200 application/yaml, this very document",
    "/openapi.yaml",
    "get",
    lambda: session.get(f"{BASE}/openapi.yaml", timeout=10),
    200,
    lambda r: require(r.text == SPEC_TEXT, "differs from openapi.yaml"),
)

# ----- Create Order -----
full: dict[str, Any] = {
    "merchant_order_id": f"api-check-{uuid.uuid4()}",
    "currency": "EUR",
    "amount": 19.99,
    "title": "T-shirt",
    "description": "Blue, size M",
    "callback_url": "https://shop.example/callback?ref=7",
    "webhook_url": "http://127.0.0.1:9/webhook",
    "success_url": "https://shop.example/ok",
    "cancel_url": "https://shop.example/cancelled",
    "customer_email": "buyer@shop.example",
    "pay_currency": "BTC",
}
created = step(
    "POST /v1/orders: 201 with every field",
    "/v1/orders",
    "post",
    lambda: post_order(full),
    201,
    all_of(member("data/amount", 19.99), member("data/status", "NEW")),
)
order_id = created.json()["data"]["order_id"] if created is not None else str(uuid.uuid4())
step(
    "POST /v1/orders again: 201, the original body replayed byte for byte",
    "/v1/orders",
    "post",
    lambda: post_order(full),
    201,
    lambda r: require(created is None or r.content == created.content, "replay differs from the original body"),
)
step(
    "POST /v1/orders: 201 with the amount as a numeric string, nothing optional",
    "/v1/orders",
    "post",
    lambda: post_order({"currency": "JPY", "amount": "1500"}),
    201,
    all_of(member("data/amount", 1500), member("data/title", None), member("data/callback_url", None)),
)
step(
    "POST /v1/orders: 400 ORDER_DUPLICATE (same merchant_order_id, other amount)",
    "/v1/orders",
    "post",
    lambda: post_order({**full, "amount": 20}),
    400,
    error_code("ORDER_DUPLICATE"),
)
step(
    "POST /v1/orders: 400 PARAMETERS_MISSING (no currency)",
    "/v1/orders",
    "post",
    lambda: post_order({"amount": 5}),
    400,
    error_code("PARAMETERS_MISSING"),
)
step(
    "POST /v1/orders: 400 PARAMETERS_MISSING (body is not JSON)",
    "/v1/orders",
    "post",
    lambda: session.post(f"{BASE}/v1/orders", data=b"not json", headers=key_headers(), timeout=10),
    400,
    error_code("PARAMETERS_MISSING"),
)
step(
    "POST /v1/orders: 400 API_LIMIT_EXCEEDED (title of 201 characters)",
    "/v1/orders",
    "post",
    lambda: post_order({"currency": "USD", "amount": 1, "title": "x" * 201}),
    400,
    error_code("API_LIMIT_EXCEEDED"),
)
step(
    "POST /v1/orders: 400 AUTHENTICATION_FAILED (no x-api-key)",
    "/v1/orders",
    "post",
    lambda: post_order({"currency": "USD", "amount": 1}, key=None),
    400,
    error_code("AUTHENTICATION_FAILED"),
)
step(
    "POST /v1/orders: 401 Unauthorized (unknown key)",
    "/v1/orders",
    "post",
    lambda: post_order({"currency": "USD", "amount": 1}, key="test_" + "A" * 40),
    401,
    error_code("Unauthorized"),
)

# ----- Get Order, Get Orders -----
step(
    "GET /v1/orders/{order_id}: 200 order and invoice",
    "/v1/orders/{order_id}",
    "get",
    lambda: session.get(f"{BASE}/v1/orders/{order_id}", headers=key_headers(), timeout=10),
    200,
    all_of(
        member("order/order_id", order_id),
        member("order/cancel_url", full["cancel_url"]),
        member("invoice/currency", "BTC"),
    ),
)
step(
    "GET /v1/orders/{order_id}: 400 ORDER_NOT_VALID with eror (unknown order)",
    "/v1/orders/{order_id}",
    "get",
    lambda: session.get(f"{BASE}/v1/orders/{uuid.uuid4()}", headers=key_headers(), timeout=10),
    400,
    error_code("ORDER_NOT_VALID"),
)
step(
    "GET /v1/orders/{order_id}: 400 ORDER_NOT_VALID (not a UUID)",
    "/v1/orders/{order_id}",
    "get",
    lambda: session.get(f"{BASE}/v1/orders/not-an-id", headers=key_headers(), timeout=10),
    400,
    error_code("ORDER_NOT_VALID"),
)
step(
    "GET /v1/orders?status=NEW&limit=1: 200 page",
    "/v1/orders",
    "get",
    lambda: session.get(f"{BASE}/v1/orders", params={"status": "NEW", "limit": "1"}, headers=key_headers(), timeout=10),
    200,
    all_of(member("limit", 1), member("offset", 0), member("has_more", True), member("orders/0/status", "NEW")),
)
step(
    "GET /v1/orders?limit=51: 400 API_LIMIT_EXCEEDED",
    "/v1/orders",
    "get",
    lambda: session.get(f"{BASE}/v1/orders?limit=51", headers=key_headers(), timeout=10),
    400,
    error_code("API_LIMIT_EXCEEDED"),
)
step(
    "GET /v1/orders?offset=-1: 400 PARAMETERS_MISSING",
    "/v1/orders",
    "get",
    lambda: session.get(f"{BASE}/v1/orders?offset=-1", headers=key_headers(), timeout=10),
    400,
    error_code("PARAMETERS_MISSING"),
)
step(
    "DELETE /v1/orders: 404 Not Found (no such method)",
    "/v1/orders",
    "get",
    lambda: session.delete(f"{BASE}/v1/orders", headers=key_headers(), timeout=10),
    404,
    error_code("Not Found"),
)


# ----- Sandbox simulation -----
def simulate(body: Any, target: str = order_id) -> requests.Response:
    return session.post(f"{BASE}/v1/orders/{target}/simulate", json=body, headers=key_headers(), timeout=10)


sim = "/v1/orders/{order_id}/simulate"
step(
    "POST simulate partial: 200, PENDING",
    sim,
    "post",
    lambda: simulate({"action": "partial"}),
    200,
    member("order/status", "PENDING"),
)
step(
    "POST simulate pay unconfirmed: 200, still PENDING",
    sim,
    "post",
    lambda: simulate({"action": "pay", "confirmed": False}),
    200,
    member("order/status", "PENDING"),
)
step(
    "POST simulate confirm: 200, PAID",
    sim,
    "post",
    lambda: simulate({"action": "confirm"}),
    200,
    all_of(member("order/status", "PAID"), member("invoice/receive_currency", "EUR")),
)
step(
    "POST simulate cancel on a PAID order: 400 ORDER_STATE_INVALID",
    sim,
    "post",
    lambda: simulate({"action": "cancel"}),
    400,
    error_code("ORDER_STATE_INVALID"),
)
step(
    "POST simulate bad action: 400 PARAMETERS_MISSING",
    sim,
    "post",
    lambda: simulate({"action": "dance"}),
    400,
    error_code("PARAMETERS_MISSING"),
)
step(
    "POST simulate on an unknown order: 400 ORDER_NOT_VALID",
    sim,
    "post",
    lambda: simulate({"action": "pay"}, target=str(uuid.uuid4())),
    400,
    error_code("ORDER_NOT_VALID"),
)


# ----- The payment page -----
def page(method: str, route: str, order: str | None) -> requests.Response:
    params = {} if order is None else {"id": order}
    return session.request(method, f"{BASE}{route}", params=params, timeout=10)


step(
    "GET /pay/status of the PAID order: 200 with redirect_url",
    "/pay/status",
    "get",
    lambda: page("GET", "/pay/status", order_id),
    200,
    lambda r: require(
        str(r.json()["redirect_url"]).startswith(full["callback_url"]), f"redirect_url {r.json()['redirect_url']!r}"
    ),
)
step("GET /pay: 200 the HTML page with its security headers", "/pay", "get", lambda: page("GET", "/pay", order_id), 200)
step("GET /pay of an unknown order: 404 HTML page", "/pay", "get", lambda: page("GET", "/pay", str(uuid.uuid4())), 404)
step("GET /pay without id: 404 HTML page", "/pay", "get", lambda: page("GET", "/pay", None), 404)
step(
    "GET /pay/status without id: 400 ORDER_NOT_VALID",
    "/pay/status",
    "get",
    lambda: page("GET", "/pay/status", None),
    400,
    error_code("ORDER_NOT_VALID"),
)
fresh = post_order({"currency": "USD", "amount": 10, "cancel_url": "https://shop.example/no"})
fresh_id = fresh.json().get("data", {}).get("order_id", str(uuid.uuid4())) if fresh.status_code == 201 else ""
step(
    "POST /pay/cancel of a NEW order: 200 CANCELLED, redirect to cancel_url",
    "/pay/cancel",
    "post",
    lambda: page("POST", "/pay/cancel", fresh_id),
    200,
    all_of(
        member("status", "CANCELLED"),
        lambda r: require(
            str(r.json()["redirect_url"]).startswith("https://shop.example/no?"),
            f"redirect_url {r.json()['redirect_url']!r}",
        ),
    ),
)
step(
    "POST /pay/cancel again: 400 ORDER_STATE_INVALID",
    "/pay/cancel",
    "post",
    lambda: page("POST", "/pay/cancel", fresh_id),
    400,
    error_code("ORDER_STATE_INVALID"),
)
other = post_order({"currency": "KWD", "amount": "1.125", "pay_currency": "ETH"})
other_id = other.json().get("data", {}).get("order_id", str(uuid.uuid4())) if other.status_code == 201 else ""
step(
    "POST /pay/simulate of a NEW order: 200 PAID, nothing due",
    "/pay/simulate",
    "post",
    lambda: page("POST", "/pay/simulate", other_id),
    200,
    all_of(member("status", "PAID"), member("due_amount", 0), member("sandbox", True)),
)
step(
    "POST /pay/simulate of the PAID order: 400 ORDER_STATE_INVALID",
    "/pay/simulate",
    "post",
    lambda: page("POST", "/pay/simulate", other_id),
    400,
    error_code("ORDER_STATE_INVALID"),
)

print(f"# responses checked: {results['passed']} passed, {results['failed']} failed", flush=True)
sys.exit(1 if results["failed"] else 0)
