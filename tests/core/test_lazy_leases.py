"""Building a leased generator never touches the coordinator: the claim is at the first id.

A models module with module-level generators must import in a build step
(``collectstatic``, ``makemigrations``) that has no Redis and no lease table yet. Each
test points a lease at a coordinator that cannot answer (a loopback port nothing listens
on, a database without the table), builds generators with it, and checks that nothing
connected; then the first id raises ``CoordinatorUnavailableError``, or claims once the
coordinator is up.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import services
from tests.core.test_fork import run_in_children
from tests.redis_servers import RedisServer, free_port, key_prefix
from uid_fields import (
    TWITTER,
    CoordinatorUnavailableError,
    DatabaseLease,
    ManualClock,
    RedisLease,
    ShardedIdGenerator,
    SnowflakeGenerator,
    SnowflakeLayout,
)
from uid_fields.clock import ManualMonotonicClock
from uid_fields.config.build import build_generator
from uid_fields.ids.generators import DecimalGenerator
from uid_fields.ids.layouts import DECIMAL, INSTAGRAM


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback socket that listens but never accepts: a connection attempt shows up
    in its backlog (a non-blocking ``accept`` returns it), so a test can tell that none
    was made."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def attempted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def counting(connect: Callable[[], Any]) -> tuple[Callable[[], Any], list[int]]:
    calls: list[int] = []

    def factory() -> Any:
        calls.append(1)
        return connect()

    return factory, calls


def test_a_redis_lease_claims_nothing_until_the_first_id(listener: socket.socket) -> None:
    url = f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
    lease = RedisLease(url, "lazy", ttl=3, clock=ManualMonotonicClock())
    gen = SnowflakeGenerator(TWITTER, datacenter=1, worker=lease, clock=ManualClock())
    layout = SnowflakeLayout(
        epoch_ms=INSTAGRAM.epoch_ms, fields=(("shard", 8), ("worker", 5)), sequence_bits=10
    )
    sharded = ShardedIdGenerator(layout, clock=ManualClock(), worker=RedisLease(url, "sharded"))
    assert not attempted(listener)
    assert lease.value is None and lease.claims == 0 and lease.last_error is None
    assert "worker=" in repr(gen)  # repr never claims either
    assert not attempted(listener)
    del sharded
    lease.release()


def test_a_generator_on_a_redis_that_is_down_builds_then_its_first_id_raises(
    tmp_path: Path,
) -> None:
    server = RedisServer(tmp_path)  # its port is chosen, nothing listens on it yet
    lease = RedisLease(server.url, "lazy", ttl=3, prefix="uid_fields:lazy:")
    gen = SnowflakeGenerator(TWITTER, datacenter=1, worker=lease)
    decimal = DecimalGenerator(DECIMAL, server=RedisLease(server.url, "dec", ttl=3))
    assert lease.claims == 0 and lease.last_error is None
    with pytest.raises(CoordinatorUnavailableError, match=str(server.port)):
        gen.next_id()
    with pytest.raises(CoordinatorUnavailableError):
        gen.next_ids(3)  # still no id: each call before the first claim asks again
    with pytest.raises(CoordinatorUnavailableError):
        decimal.next_id()
    server.start()
    try:
        ids = gen.next_ids(100)  # claims now that Redis is up
        assert len(set(ids)) == 100
        assert all(TWITTER.decompose(i).fields["worker"] == 0 for i in ids)
        assert lease.claims == 1 and gen.node == {"datacenter": 1, "worker": 0}
        assert decimal.next_id() % 10 == 0
    finally:
        lease.release()
        server.stop()


def test_settings_build_a_leased_generator_without_redis() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    gen = build_generator(
        "orders",
        {
            "kind": "snowflake",
            "layout": "twitter",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {"datacenter": 0, "worker": {"lease": "redis", "url": url, "name": "o"}},
        },
    )
    with pytest.raises(CoordinatorUnavailableError):
        gen.next_id()


def test_a_database_lease_without_its_table_builds_then_claims_once_it_exists(
    tmp_path: Path,
) -> None:
    path = tmp_path / "leases.db"
    factory, calls = counting(lambda: sqlite3.connect(path, timeout=30, check_same_thread=False))
    lease = DatabaseLease(factory, "orders", ttl=3)
    gen = SnowflakeGenerator(TWITTER, worker=lease)
    assert calls == [] and not path.exists()  # not even the file was made
    with pytest.raises(CoordinatorUnavailableError, match="create_table"):
        gen.next_id()
    lease.create_table()  # what the migration does, after the build step
    assert len(set(gen.next_ids(50))) == 50
    assert gen.node["worker"] == 0
    lease.release()


def test_a_postgres_lease_connects_at_the_first_id_only() -> None:
    factory, calls = counting(services.postgres_connection)
    table = f"uidf_lazy_{uuid.uuid4().hex[:12]}"
    lease = DatabaseLease(factory, "orders", ttl=3, table=table, dialect="postgresql")
    gen = SnowflakeGenerator(TWITTER, worker=lease)
    assert calls == []
    try:
        lease.create_table()
        assert calls and gen.next_id() > 0
        assert lease.claims == 1
    finally:
        lease.release()
        conn = services.postgres_connection()
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()


def test_an_unreachable_database_lease_builds_and_raises_at_the_first_id() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    gen = SnowflakeGenerator(TWITTER, worker=DatabaseLease(url, "orders"))
    with pytest.raises(CoordinatorUnavailableError, match="migrate"):
        gen.next_id()


def test_a_lease_on_a_live_redis_claims_at_the_first_id() -> None:
    """The shared Redis: the claim is at the first id, and node shows the value claimed."""
    with key_prefix() as prefix:
        lease = RedisLease(services.REDIS_URL, "lazy", ttl=3, prefix=prefix)
        gen = SnowflakeGenerator(TWITTER, worker=lease)
        assert lease.claims == 0
        gen.next_id()
        assert lease.claims == 1 and lease.value == gen.node["worker"]
        lease.release()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_generator_built_before_a_fork_claims_in_each_child_only() -> None:
    """gunicorn --preload: the master imports the models (builds the generators) and
    forks; the master never claims, each worker claims an id of its own at its first id."""
    with key_prefix() as prefix:
        lease = RedisLease(services.REDIS_URL, "preload", ttl=5, prefix=prefix)
        gen = SnowflakeGenerator(TWITTER, worker=lease)

        def child() -> dict[str, object]:
            ids = gen.next_ids(1000)
            return {"worker": gen.node["worker"], "ids": ids, "claims": lease.claims}

        results = run_in_children(3, child)
        assert all("error" not in r for r in results), results
        oks = [r["ok"] for r in results]  # type: ignore[index]
        assert sorted(o["worker"] for o in oks) == [0, 1, 2]
        assert all(o["claims"] == 1 for o in oks)
        ids = [i for o in oks for i in o["ids"]]
        assert len(set(ids)) == len(ids) == 3000
        assert lease.claims == 0 and lease.value is None  # the parent claimed nothing
        assert gen.next_id() > 0 and lease.value == 3  # workers 0..2 are the children's
        lease.release()
