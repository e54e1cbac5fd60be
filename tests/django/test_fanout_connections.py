"""The fan-out pool's connections follow Django's lifecycle, and a setting bounds the
queries a process runs on one shard at once.

Counted where it matters: in PostgreSQL's ``pg_stat_activity``, the sessions open on the
shards' test databases other than this thread's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import connections
from django.db.backends.signals import connection_created
from django.test import override_settings
from rest_framework.test import APIClient

from tests import services
from tests.django.testapp.models import Order
from uid_fields.errors import FanOutTimeoutError
from uid_fields.ops import parallel

pytestmark = [
    pytest.mark.django_db(databases="__all__", transaction=True),
    pytest.mark.skipif(settings.BACKEND != "postgres", reason="counts PostgreSQL sessions"),
]

SLEEP_S = 0.3
SLEEPING = f"(SELECT 1 FROM pg_sleep({SLEEP_S})) = 1"


@pytest.fixture(autouse=True)
def fresh_pool() -> Iterator[None]:
    parallel.shutdown()  # no pool thread holds a connection yet
    yield
    parallel.shutdown()


def _shard_databases() -> list[str]:
    return sorted({connections[alias].settings_dict["NAME"] for alias in settings.SHARDS})


def _own_pids() -> set[int]:
    return {
        c.connection.info.backend_pid
        for c in connections.all(initialized_only=True)
        if c.vendor == "postgresql" and c.connection is not None
    }


def pool_sessions() -> int:
    """Sessions on the shards' databases that this thread did not open: the pool's."""
    admin = services.postgres_connection()
    try:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = ANY(%s)", [_shard_databases()]
            )
            pids = {row[0] for row in cursor.fetchall()}
    finally:
        admin.close()
    return len(pids - _own_pids())


def eventually(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def on_every_shard() -> int:
    """Orders created until every shard holds one; their number."""
    made: set[str] = set()
    count = 0
    while made != set(settings.SHARDS) and count < 400:
        made.add(Order.objects.create(note="x")._state.db)
        count += 1
    assert made == set(settings.SHARDS)
    return count


def _max_age(monkeypatch: pytest.MonkeyPatch, seconds: float | None) -> None:
    # Every thread's connection to an alias reads this one settings dict when it connects.
    for alias in settings.SHARDS:
        monkeypatch.setitem(connections[alias].settings_dict, "CONN_MAX_AGE", seconds)


def test_with_conn_max_age_0_the_pool_closes_its_connections_when_the_request_ends() -> None:
    count = on_every_shard()
    assert pool_sessions() == 0
    response = APIClient().get("/api/orders/")  # a request that fans out, then ends
    assert response.status_code == 200 and len(response.json()) == count
    assert eventually(lambda: pool_sessions() == 0), (
        f"{pool_sessions()} pool sessions still open after the request ended"
    )
    # and the next request connects again
    assert len(APIClient().get("/api/orders/").json()) == count


def test_with_conn_max_age_the_connections_last_until_their_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _max_age(monkeypatch, 1)
    on_every_shard()
    connected = time.monotonic()
    assert Order.objects.on_all_shards().count() > 0
    request_started.send(sender=None)
    request_finished.send(sender=None)
    time.sleep(0.2)
    assert pool_sessions() >= len(settings.SHARDS)  # younger than CONN_MAX_AGE: kept
    time.sleep(max(0.0, connected + 1.1 - time.monotonic()))
    request_finished.send(sender=None)  # the next request end after the age
    assert eventually(lambda: pool_sessions() == 0)


def test_with_conn_health_checks_a_kept_connection_is_checked_before_reuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _max_age(monkeypatch, None)
    for alias in settings.SHARDS:
        monkeypatch.setitem(connections[alias].settings_dict, "CONN_HEALTH_CHECKS", True)
    on_every_shard()
    failed: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except Exception as exc:
            failed.append(f"{context['connection'].alias}: {type(exc).__name__}")
            raise

    def wrap(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(record)  # every pool connection's queries

    connection_created.connect(wrap)
    try:
        assert Order.objects.on_all_shards().count() > 0  # the pool threads connect
        admin = services.postgres_connection()
        try:  # the server drops them while they sit in the pool (a restart)
            with admin.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = ANY(%s) AND NOT (pid = ANY(%s))",
                    [_shard_databases(), list(_own_pids())],
                )
        finally:
            admin.close()
        assert eventually(lambda: pool_sessions() == 0)
        request_started.send(sender=None)  # a new request: kept connections get checked
        assert Order.objects.on_all_shards().count() > 0
    finally:
        connection_created.disconnect(wrap)
    assert failed == []  # checked and replaced before the query, not after it failed


def test_idle_pool_threads_do_not_keep_connections_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _max_age(monkeypatch, None)  # persistent: only the idle limit closes them
    on_every_shard()
    parallel.set_idle_timeout(0.3)
    try:
        assert Order.objects.on_all_shards().count() > 0
        assert pool_sessions() >= len(settings.SHARDS)
        assert eventually(lambda: pool_sessions() == 0)  # no request ended: idle threads
    finally:
        parallel.set_idle_timeout(parallel.DEFAULT_IDLE_TIMEOUT_S)


def _concurrency(limit: int, **more: Any) -> override_settings:
    return override_settings(
        UID_FIELDS={**settings.UID_FIELDS, "FAN_OUT_CONCURRENCY": limit, **more}
    )


def test_one_query_per_shard_at_a_time_with_a_concurrency_of_one() -> None:
    on_every_shard()
    databases = _shard_databases()
    peak: dict[str, int] = {}
    watching = threading.Event()
    done = threading.Event()

    def watch() -> None:
        admin = services.postgres_connection()
        try:
            with admin.cursor() as cursor:
                while not done.is_set():
                    cursor.execute(
                        "SELECT datname, count(*) FROM pg_stat_activity WHERE datname = ANY(%s)"
                        " AND state = 'active' AND query LIKE %s GROUP BY datname",
                        [databases, "%pg_sleep%"],
                    )
                    for name, active in cursor.fetchall():
                        peak[name] = max(peak.get(name, 0), active)
                    watching.set()
                    time.sleep(0.01)
        finally:
            admin.close()

    results: list[int] = []
    errors: list[BaseException] = []

    def fan_out() -> None:
        try:
            results.append(Order.objects.on_all_shards().extra(where=[SLEEPING]).count())
        except BaseException as exc:  # reported below
            errors.append(exc)

    with _concurrency(1):
        watcher = threading.Thread(target=watch)
        watcher.start()
        watching.wait(5)
        callers = [threading.Thread(target=fan_out) for _ in range(2)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(30)
        done.set()
        watcher.join(5)
    assert not errors and len(results) == 2 and results[0] == results[1] > 0
    assert peak and max(peak.values()) == 1, peak  # the second fan-out waited, shard by shard


def test_the_deadline_holds_while_a_fan_out_waits_for_a_slot() -> None:
    on_every_shard()
    release = threading.Event()
    occupied = threading.Barrier(len(settings.SHARDS) + 1, timeout=5)

    def hold() -> None:
        occupied.wait()
        release.wait(30)

    holder = threading.Thread(
        target=parallel.run_per_shard,
        args=([hold] * len(settings.SHARDS),),
        kwargs={"names": list(settings.SHARDS), "concurrency": 1},
    )
    holder.start()
    try:
        occupied.wait()  # every shard's one slot is taken
        with _concurrency(1, FAN_OUT_TIMEOUT=0.5):
            with pytest.raises(FanOutTimeoutError) as raised:
                Order.objects.on_all_shards().count()
            assert holder.is_alive()  # the deadline came while every slot was still held
        assert sorted(raised.value.shards) == sorted(settings.SHARDS)
    finally:
        release.set()
        holder.join(10)
    with _concurrency(1):
        assert Order.objects.on_all_shards().count() > 0  # the slots are free again
