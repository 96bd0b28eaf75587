"""A brand-new store opened by several connections at once: each is told the store, none
"database is locked".

The first opening switches the file from SQLite's rollback journal to WAL and creates the tables.
Two connections doing that at once can deadlock on the file's locks, and SQLite then answers one
of them "database is locked" without waiting (about one opening in fifty did, three at a time):
so many fresh stores are opened here that the old behaviour fails this test almost surely.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path

from aiptrain._backends.local.store import JobStore
from aiptrain._backends.local.store_connection import StoreConnection
from aiptrain._backends.local.store_schema import ensure_schema

AT_ONCE = 3
FRESH_STORES = 300


def _all_at_once(work: Callable[[], object]) -> tuple[list[object], list[BaseException]]:
    """Run `work` in AT_ONCE threads released together; what they returned, and what they raised."""
    results: list[object] = []
    failures: list[BaseException] = []
    start = threading.Barrier(AT_ONCE)

    def run() -> None:
        start.wait()
        try:
            results.append(work())
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(AT_ONCE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results, failures


def test_connections_creating_a_new_schema_at_once_all_succeed(tmp_path: Path) -> None:
    for index in range(FRESH_STORES):
        database = tmp_path / f"store-{index}" / "jobs.db"
        database.parent.mkdir()
        database.touch()
        connections = [StoreConnection(database) for _ in range(AT_ONCE)]
        for connection in connections:
            connection.connection()  # opened before the race, as each thread's first query opens it
        try:
            _, failures = _all_at_once(functools.partial(_ensure_schema_of_one, list(connections)))
            assert not failures, f"store {index}: {failures[0]!r}"
        finally:
            for connection in connections:
                connection.close()
        reopened = StoreConnection(database)
        assert reopened.connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        reopened.close()


def _ensure_schema_of_one(connections: list[StoreConnection]) -> None:
    ensure_schema(connections.pop())


def test_threads_opening_a_brand_new_home_all_get_the_store(tmp_path: Path) -> None:
    for index in range(50):
        home = tmp_path / f"home-{index}"
        stores, failures = _all_at_once(functools.partial(JobStore, home))
        try:
            assert not failures, f"home {index}: {failures[0]!r}"
            assert len(stores) == AT_ONCE
            for store in stores:
                assert isinstance(store, JobStore) and store.active_jobs() == []
        finally:
            for store in stores:
                if isinstance(store, JobStore):
                    store.close()
