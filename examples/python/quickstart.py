"""coinorder from Python: a sandbox order paid end to end, its signed webhook received and verified."""

import http.server
import sys
import tempfile
import threading
from decimal import Decimal

import coinorder

webhooks: list[tuple[dict[str, str], bytes]] = []


class Receiver(http.server.BaseHTTPRequestHandler):  # the shop's webhook endpoint, on a local port
    def do_POST(self) -> None:
        webhooks.append((dict(self.headers), self.rfile.read(int(self.headers["content-length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


receiver = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=receiver.handle_request, daemon=True).start()  # serves one request

with tempfile.TemporaryDirectory() as tmp, coinorder.Service.open(f"{tmp}/shop.db", "sandbox") as svc:
    key = svc.create_key(user_id=1, webhook_url=f"http://127.0.0.1:{receiver.server_port}/hooks")
    merchant = svc.authenticate(key.plain_key)  # what the x-api-key header does
    created = svc.create_order(merchant, currency="USD", amount=Decimal("19.99"), title="T-shirt")
    print(f"pay {created.invoice.amount} {created.invoice.currency} at {created.payment_url}")
    svc.simulate(created.order.order_id, "pay")  # the sandbox's customer pays what is due
    order = svc.get_order(merchant, created.order.order_id).order
    print(f"order {order.order_id}: {order.status}, {order.amount} {order.currency}")
    svc.deliver_due()  # sends the order.paid webhook now (a background worker's job in a real app)
    event = coinorder.verify_webhook(key.webhook_secret, *webhooks[0])  # raises if forged or stale
    print(f"webhook {event['type']} verified for order {event['data']['order']['order_id']}")
sys.exit(0 if order.status == "PAID" and event["type"] == "order.paid" else 1)
