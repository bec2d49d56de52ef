"""coinorder's HTTP API (/v1/...) and hosted payment page (/pay) mounted in a Flask app."""

import sys
from urllib.parse import quote, unquote

from flask import Flask, Request, Response, request

import coinorder

# Every method reaches coinorder, which answers the ones the API has not with its own
# JSON 404, as `coinorder serve` does (Flask would answer 405 or OPTIONS in HTML).
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def request_target(req: Request) -> str:
    """The path and query as the client sent them, still percent-encoded: an id holding
    %2F or %3F stays one id. Flask's own `request.path` is decoded."""
    raw = req.environ.get("RAW_URI") or req.environ.get("REQUEST_URI")  # gunicorn, werkzeug
    if isinstance(raw, str) and raw.startswith("/"):
        # An app mounted under a prefix (SCRIPT_NAME) is routed by its own path: the raw
        # path's tail that reads as request.path, found at a "/" of the raw path.
        raw_path, mark, raw_query = raw.partition("?")
        if unquote(raw_path) == req.script_root + req.path:
            for at in (i for i, c in enumerate(raw_path) if c == "/"):
                if unquote(raw_path[:at]) == req.script_root:
                    return raw_path[at:] + mark + raw_query
    query = req.query_string.decode("latin-1")
    return quote(req.path, safe="/:@!$&'()*+,;=-._~") + (f"?{query}" if query else "")


def create_app(svc: coinorder.Service) -> Flask:
    app = Flask(__name__)

    @app.route("/v1", methods=METHODS, provide_automatic_options=False)
    @app.route("/v1/<path:rest>", methods=METHODS, provide_automatic_options=False)
    @app.route("/pay", methods=METHODS, provide_automatic_options=False)
    @app.route("/pay/<path:rest>", methods=METHODS, provide_automatic_options=False)
    def coinorder_api(rest: str = "") -> Response:
        # request.headers, not dict(request.headers): a header sent twice stays twice.
        # client: the TCP peer, for the per-address limit on failed authentications (a
        # proxy on this host is read through its X-Forwarded-For, as `serve` reads it).
        answer = svc.handle(
            request.method, request_target(request), request.headers, request.get_data(), client=request.remote_addr
        )
        return Response(answer.body, status=answer.status, headers=answer.headers)

    return app


if __name__ == "__main__":  # python flask_app.py [shop.db]: a sandbox on http://127.0.0.1:8080
    service = coinorder.Service.open(sys.argv[1] if len(sys.argv) > 1 else "shop.db")
    print("API key (shown once):", service.create_key(1).plain_key)
    service.start_workers()  # expiry, webhooks and e-mails in the background, as `serve` runs them
    create_app(service).run(host="127.0.0.1", port=8080)
