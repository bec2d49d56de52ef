"""One Service shared by many threads."""

from __future__ import annotations

import http.server
import threading
import time
from decimal import Decimal
from pathlib import Path

import coinorder

THREADS = 8
ORDERS_PER_THREAD = 200


def test_eight_threads_create_1600_orders_on_one_service(tmp_path: Path) -> None:
    with coinorder.Service.open(str(tmp_path / "threads.db"), rate_limit=0, synchronous="normal") as svc:
        merchant = svc.authenticate(svc.create_key(1).plain_key)
        start = threading.Barrier(THREADS)
        ids: list[list[str]] = [[] for _ in range(THREADS)]
        errors: list[BaseException] = []

        def work(index: int) -> None:
            try:
                start.wait()
                for n in range(ORDERS_PER_THREAD):
                    created = svc.create_order(
                        merchant,
                        currency="USD",
                        amount=Decimal(f"{index + 1}.{n % 100:02d}"),
                        merchant_order_id=f"t{index}-{n}",
                    )
                    assert created.replayed is False
                    ids[index].append(created.order.order_id)
            except BaseException as error:  # reported below, with the thread's index
                errors.append(error)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        assert errors == []
        every = [order_id for per_thread in ids for order_id in per_thread]
        assert len(every) == THREADS * ORDERS_PER_THREAD
        assert len(set(every)) == THREADS * ORDERS_PER_THREAD

        # Every order is there with the amount its thread asked for.
        for index in range(THREADS):
            for n in (0, 99, ORDERS_PER_THREAD - 1):
                order = svc.get_order(merchant, ids[index][n]).order
                assert order.merchant_order_id == f"t{index}-{n}"
                assert order.amount == Decimal(f"{index + 1}.{n % 100:02d}")
        last = svc.list_orders(merchant, limit=50, offset=THREADS * ORDERS_PER_THREAD - 50)
        assert (len(last.orders), last.has_more) == (50, False)


def test_reads_and_writes_from_threads_at_once(svc: coinorder.Service, merchant: coinorder.Merchant) -> None:
    order_id = svc.create_order(merchant, currency="USD", amount=1).order.order_id
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(200):
                assert svc.get_order(merchant, order_id).order.order_id == order_id
                assert svc.handle("GET", f"/v1/orders/{order_id}", {"x-api-key": "nope"}).status == 401
        except BaseException as error:
            errors.append(error)

    def writer() -> None:
        try:
            for n in range(100):
                svc.simulate(svc.create_order(merchant, currency="USD", amount=n + 1).order.order_id, "pay")
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [threading.Thread(target=writer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(svc.list_orders(merchant, status="PAID", limit=50).orders) == 50


def test_the_gil_is_released_while_a_webhook_is_sent(svc: coinorder.Service) -> None:
    """Other Python threads run while deliver_due waits on a slow receiver."""

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", "0")))
            time.sleep(1.0)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        key = svc.create_key(1, webhook_url=f"http://127.0.0.1:{server.server_address[1]}/slow")
        merchant = svc.authenticate(key.plain_key)
        order_id = svc.create_order(merchant, currency="USD", amount=1).order.order_id
        svc.simulate(order_id, "pay")
        reports: list[coinorder.DeliveryReport] = []
        delivering = threading.Thread(target=lambda: reports.append(svc.deliver_due()))
        started = time.monotonic()
        delivering.start()
        reads = 0
        while delivering.is_alive() and time.monotonic() - started < 10:
            assert svc.get_order(merchant, order_id).order.status == "PAID"
            reads += 1
        delivering.join()
        assert time.monotonic() - started >= 0.9
        assert reports[0].delivered == 1
        assert reads > 20, f"only {reads} reads ran while deliver_due waited: is the GIL held?"
    finally:
        server.shutdown()
        server.server_close()
