"""Forked processes: pre-forking servers (gunicorn --preload, multiprocessing with fork)."""

from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Callable

import pytest

import coinorder


def in_children(count: int, work: Callable[[], str]) -> list[str]:
    """Forks `count` children that each run `work` and report its text (or the error it
    raised); returns their reports."""
    children = []
    for _ in range(count):
        read_end, write_end = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns about forking a process with threads; that is the case under test.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os.close(read_end)
            # A child stuck on a lock its parent's thread held at the fork dies, and says so.
            signal.alarm(60)
            try:
                report = work()
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                report = f"{type(error).__name__}: {error}"
            os.write(write_end, report.encode())
            os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))
    reports = []
    for pid, read_end in children:
        with os.fdopen(read_end, "rb") as pipe:
            reports.append(pipe.read().decode())
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child {pid}: status {status}, {reports}"
    return reports


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_children_forked_after_the_parent_used_coinorder_make_ids_of_their_own(db_path: str) -> None:
    # The parent draws random ids first (as a preloading server does at import); each
    # child then opens its own Service, as the README says. A child that carried on the
    # parent's random state drew its siblings' ids: duplicate keys, lost payments.
    with coinorder.Service.open(db_path, rate_limit=0) as svc:
        plain_key = svc.create_key(1).plain_key
        svc.create_order(svc.authenticate(plain_key), currency="USD", amount=1)

    def create() -> str:
        with coinorder.Service.open(db_path, rate_limit=0) as own:
            created = own.create_order(own.authenticate(plain_key), currency="USD", amount=2)
            paid = own.simulate(created.order.order_id, "pay")
        return f"{created.order.order_id} {created.order.merchant_order_id} {paid.order.status}"

    reports = in_children(3, create)
    assert all(report.endswith(" PAID") for report in reports), reports
    order_ids = {report.split()[0] for report in reports}
    merchant_order_ids = {report.split()[1] for report in reports}
    assert len(order_ids) == 3 and len(merchant_order_ids) == 3, reports


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_service_opened_before_a_fork_refuses_calls_in_the_child(db_path: str) -> None:
    svc = coinorder.Service.open(db_path, rate_limit=0)
    svc.start_workers(interval=0.05)

    def use_inherited() -> str:
        refused = "the inherited service answered"
        try:
            svc.list_keys()
        except ValueError as error:
            refused = str(error)
        # Closing lets go of the parent's connections and workers without touching them.
        running = svc.workers_running
        svc.close()
        return f"{refused} | running={running}"

    [report] = in_children(1, use_inherited)
    assert f"opened in process {os.getpid()} and this process is a fork of it" in report, report
    assert report.endswith("| running=False"), report
    # The parent's service is untouched.
    assert svc.workers_running
    assert svc.create_key(2).key.user_id == 2
    svc.close()
