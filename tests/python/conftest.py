"""Shared fixtures of the Python binding's tests: a fresh sandbox database per test."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import ContextManager
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import coinorder

# The examples are imported by their tests as modules (`flask_app`, `asgi_app`).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "python"))

# Each example of a property test is a database write or two: no deadline (CI machines vary),
# and a bounded count so the whole suite stays well under a minute. The database fixture is
# per test, shared by that test's examples (each example makes its own orders).
settings.register_profile(
    "coinorder",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
settings.load_profile("coinorder")


# With COINORDER_TEST_POSTGRES set to a PostgreSQL server's URL (scripts/test-python starts
# one for its second pass), every test's database is a fresh database on that server
# instead of a file, and the library takes the shared key file from
# COINORDER_SECRET_KEY_FILE, as a deployment on several hosts would.
POSTGRES_SERVER = os.environ.get("COINORDER_TEST_POSTGRES", "")


def on_postgres() -> bool:
    """True when the suite runs against a PostgreSQL server."""
    return POSTGRES_SERVER != ""


def fresh_database(tmp_path: Path, name: str = "shop.db") -> str:
    """A database that does not exist yet: a file in this test's own directory, or an
    empty PostgreSQL database named after it."""
    if not on_postgres():
        return str(tmp_path / name)
    database = "py_" + re.sub(r"[^a-z0-9]+", "_", f"{tmp_path.name}_{name}".lower())[:50]
    subprocess.run(
        ["psql", POSTGRES_SERVER, "-v", "ON_ERROR_STOP=1", "-qAtc", f"CREATE DATABASE {database}"],
        check=True,
    )
    return POSTGRES_SERVER.rsplit("/", 1)[0] + "/" + database


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    """A database that does not exist yet (a file in this test's own directory, or on
    PostgreSQL a database of its own)."""
    return fresh_database(tmp_path)


@pytest.fixture
def svc(db_path: str) -> Iterator[coinorder.Service]:
    """A sandbox service without a rate limit (tests make many calls per second)."""
    with coinorder.Service.open(db_path, "sandbox", rate_limit=0, synchronous="normal") as service:
        yield service


@pytest.fixture
def created_key(svc: coinorder.Service) -> coinorder.CreatedKey:
    return svc.create_key(1)


@pytest.fixture
def merchant(svc: coinorder.Service, created_key: coinorder.CreatedKey) -> coinorder.Merchant:
    return svc.authenticate(created_key.plain_key)


@pytest.fixture
def new_order(svc: coinorder.Service, merchant: coinorder.Merchant) -> Callable[..., coinorder.CreatedOrder]:
    """Creates a USD order of the test's merchant (19.99 unless told otherwise)."""

    def make(amount: Decimal | int | str = Decimal("19.99"), **fields: str) -> coinorder.CreatedOrder:
        return svc.create_order(merchant, currency="USD", amount=amount, **fields)

    return make


# Another process holds the write lock: file locks are per process, so a second SQLite
# library in this one (Python's sqlite3) would not be seen as another writer at all.
_WRITE_LOCK_HOLDER = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
    "c.execute('ROLLBACK')\n"
)


@pytest.fixture
def hold_write_lock() -> Callable[[str], ContextManager[None]]:
    """`with hold_write_lock(path):` runs its block while another process holds the
    SQLite file's write lock, and releases it at the end."""

    @contextlib.contextmanager
    def holding(path: str) -> Iterator[None]:
        holder = subprocess.Popen(
            [sys.executable, "-c", _WRITE_LOCK_HOLDER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            yield
        finally:
            holder.communicate(timeout=10)

    return holding
