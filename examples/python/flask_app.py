"""coinorder's HTTP API (/v1/...) and hosted payment page (/pay) mounted in a Flask app."""

import sys

from flask import Flask, Response, request

import coinorder


def create_app(svc: coinorder.Service) -> Flask:
    app = Flask(__name__)

    @app.route("/v1/<path:rest>", methods=["GET", "POST"])
    @app.route("/pay", methods=["GET", "POST"], defaults={"rest": ""})
    @app.route("/pay/<path:rest>", methods=["GET", "POST"])
    def coinorder_api(rest: str) -> Response:
        query = request.query_string.decode("latin-1")  # raw, still percent-encoded
        path = request.path + (f"?{query}" if query else "")
        answer = svc.handle(request.method, path, dict(request.headers), request.get_data())
        return Response(answer.body, status=answer.status, headers=answer.headers)

    return app


if __name__ == "__main__":  # python flask_app.py [shop.db]: a sandbox on http://127.0.0.1:8080
    service = coinorder.Service.open(sys.argv[1] if len(sys.argv) > 1 else "shop.db")
    print("API key (shown once):", service.create_key(1).plain_key)
    service.start_workers()  # expiry, webhooks and e-mails in the background, as `serve` runs them
    create_app(service).run(host="127.0.0.1", port=8080)
