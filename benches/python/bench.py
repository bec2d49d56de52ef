"""Python binding vs Rust vs plain Python + sqlite3 on the same three order calls.

A benchmark to read, never a timed test: it prints numbers and fails only when a call
fails. Run it with ``scripts/bench-python`` (which builds and installs what it needs) or
directly::

    python benches/python/bench.py --rust-bin target/release/examples/bench_typed

Three implementations do the same work on a fresh database each:

* ``coinorder``    the Python binding (``coinorder.Service``), in this process;
* ``plain-sqlite`` benches/python/plain_sqlite.py, hand-written Python + ``sqlite3``, in
                   this process;
* ``rust``         examples/bench_typed.rs, the same typed calls on ``coinorder::Service``,
                   as a subprocess (it times itself and prints one line).

Each runs N creates (one transaction each, WAL + synchronous=FULL: an fsync per create,
so creates measure the disk as much as the code), then G gets cycling over the created
ids, then L list calls with limit 50. Every one of ROUNDS rounds runs all three, in an
order shuffled on odd rounds and reversed on the round after, so each one runs early
and late. The table gives per operation the median ops/s over the rounds with its spread
(min-max), and the median time per call of the Python binding against Rust
(goal: at most 1.3x) and against plain sqlite3.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plain_sqlite  # noqa: E402  (next to this file)

import coinorder  # noqa: E402

OPS = ("create", "get", "list50")
IMPLS = ("coinorder", "plain-sqlite", "rust")
LABELS = {"coinorder": "coinorder (Python)", "plain-sqlite": "plain Python+sqlite3", "rust": "Rust (typed)"}
GOAL = 1.3
AMOUNT = Decimal("19.99")

Result = dict[str, float]  # op -> ops/s


def _timed(
    creates: int,
    gets: int,
    lists: int,
    create: Callable[[int], str],
    get: Callable[[str], object],
    list50: Callable[[], int],
) -> Result:
    """Runs the three phases with ``time.perf_counter`` and returns ops/s for each."""
    ids: list[str] = []
    start = time.perf_counter()
    for i in range(creates):
        ids.append(create(i))
    create_secs = time.perf_counter() - start

    n = len(ids)
    start = time.perf_counter()
    for i in range(gets):
        get(ids[i % n])
    get_secs = time.perf_counter() - start

    want = min(creates, 50)
    start = time.perf_counter()
    for _ in range(lists):
        if list50() != want:
            raise RuntimeError("list returned the wrong number of orders")
    list_secs = time.perf_counter() - start
    return {"create": creates / create_secs, "get": gets / get_secs, "list50": lists / list_secs}


def run_coinorder(db: str, creates: int, gets: int, lists: int) -> Result:
    svc = coinorder.Service.open(db, rate_limit=0)
    try:
        key = svc.create_key(user_id=1)
        merchant = svc.authenticate(key.plain_key)

        def create(i: int) -> str:
            created = svc.create_order(
                merchant, currency="USD", amount=AMOUNT, merchant_order_id=f"bench-{i}", title=f"T-shirt {i}"
            )
            return created.order.order_id

        def get(order_id: str) -> object:
            return svc.get_order(merchant, order_id)

        def list50() -> int:
            return len(svc.list_orders(merchant, limit=50).orders)

        return _timed(creates, gets, lists, create, get, list50)
    finally:
        svc.close()


def run_plain(db: str, creates: int, gets: int, lists: int) -> Result:
    orders = plain_sqlite.PlainOrders(db)
    try:
        user_id = 1

        def create(i: int) -> str:
            created = orders.create_order(
                user_id, currency="USD", amount=AMOUNT, merchant_order_id=f"bench-{i}", title=f"T-shirt {i}"
            )
            order_id: str = created["order"]["order_id"]
            return order_id

        def get(order_id: str) -> object:
            return orders.get_order(user_id, order_id)

        def list50() -> int:
            return len(orders.list_orders(user_id, limit=50))

        return _timed(creates, gets, lists, create, get, list50)
    finally:
        orders.close()


def run_rust(rust_bin: str, db: str, creates: int, gets: int, lists: int) -> Result:
    out = subprocess.run(
        [rust_bin, db, str(creates), str(gets), str(lists)], check=True, capture_output=True, text=True
    ).stdout.strip()
    side, *pairs = out.split()
    if side != "rust":
        raise RuntimeError(f"unexpected output from {rust_bin}: {out!r}")
    values = dict(pair.split("=", 1) for pair in pairs)
    return {
        "create": float(values["create_per_s"]),
        "get": float(values["get_per_s"]),
        "list50": float(values["list50_per_s"]),
    }


def round_orders(rounds: int, rng: random.Random) -> list[list[str]]:
    """Shuffled on odd rounds, reversed on the round after."""
    orders: list[list[str]] = []
    for r in range(rounds):
        if r % 2 == 0:
            order = list(IMPLS)
            rng.shuffle(order)
        else:
            order = orders[-1][::-1]
        orders.append(order)
    return orders


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def main() -> int:
    default_bin = Path(__file__).resolve().parents[2] / "target" / "release" / "examples" / "bench_typed"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rust-bin", default=str(default_bin), help="the built bench_typed example")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--creates", type=int, default=1000)
    parser.add_argument("--gets", type=int, default=20000)
    parser.add_argument("--lists", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=None, help="seed of the run order (random when absent)")
    parser.add_argument("--tmpdir", default=None, help="where the databases go (default: the system temp dir)")
    args = parser.parse_args()
    if min(args.rounds, args.creates, args.gets, args.lists) < 1:
        parser.error("--rounds, --creates, --gets and --lists must be positive")
    if not os.access(args.rust_bin, os.X_OK):
        parser.error(f"no Rust benchmark binary at {args.rust_bin} (cargo build --release --example bench_typed)")

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix="coinorder-bench-py.", dir=args.tmpdir)
    print(
        f"coinorder Python binding vs Rust vs plain Python+sqlite3: {args.rounds} rounds of {args.creates} creates,"
        f" {args.gets} gets, {args.lists} list(50)"
    )
    print(
        f"  {platform.python_implementation()} {platform.python_version()}, coinorder {coinorder.__version__},"
        f" SQLite {sqlite3.sqlite_version} (plain), {os.cpu_count()} cpus, databases in {work}, seed {seed}"
    )
    print("  every create commits with WAL + synchronous=FULL (an fsync each): it measures the disk too")

    runners: dict[str, Callable[[str], Result]] = {
        "coinorder": lambda db: run_coinorder(db, args.creates, args.gets, args.lists),
        "plain-sqlite": lambda db: run_plain(db, args.creates, args.gets, args.lists),
        "rust": lambda db: run_rust(args.rust_bin, db, args.creates, args.gets, args.lists),
    }
    results: dict[str, dict[str, list[float]]] = {impl: {op: [] for op in OPS} for impl in IMPLS}
    started = time.perf_counter()
    try:
        for number, order in enumerate(round_orders(args.rounds, rng), start=1):
            print(f"round {number}: {' -> '.join(order)}")
            for impl in order:
                db_dir = tempfile.mkdtemp(prefix=f"{impl}-{number}.", dir=work)
                gc.collect()
                measured = runners[impl](os.path.join(db_dir, "bench.db"))
                shutil.rmtree(db_dir)
                for op in OPS:
                    results[impl][op].append(measured[op])
                print(f"  {impl:<13}" + "".join(f" {op}={fmt_rate(measured[op]):>9}/s" for op in OPS))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started

    print()
    print(f"Results: median over {args.rounds} rounds ({elapsed:.0f} s measured); spread = min - max;")
    print(f"python/x = median time per call of the coinorder Python binding / of x (goal vs Rust: <= {GOAL}x)")
    header = (
        f"{'operation':<10} {'implementation':<22} {'median ops/s':>13} {'spread (min - max)':>22}"
        f" {'us/call':>9} {'python/x':>9}"
    )
    print(header)
    print("-" * len(header))
    for op in OPS:
        medians = {impl: statistics.median(results[impl][op]) for impl in IMPLS}
        for impl in IMPLS:
            values, med = results[impl][op], medians[impl]
            spread = f"{fmt_rate(min(values))} - {fmt_rate(max(values))}"
            name = op if impl == IMPLS[0] else ""
            ratio = "" if impl == "coinorder" else f"{med / medians['coinorder']:.2f}x"
            verdict = ""
            if impl == "rust":
                verdict = "  within goal" if med / medians["coinorder"] <= GOAL else "  over goal"
            line = f"{name:<10} {LABELS[impl]:<22} {fmt_rate(med):>13} {spread:>22} {1e6 / med:>9.1f} {ratio:>9}"
            print((line + verdict).rstrip())
    print("(python/x below 1 means the Python binding is faster per call than x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
