"""A fan-out's connections come from each shard's engine pool and go back to it, and
``fan_out_concurrency`` bounds the statements a process runs on one shard at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine

from tests import services
from uid_fields.errors import FanOutTimeoutError
from uid_fields.sqlalchemy import sharded_session

from .conftest import DATABASES, postgres_orders
from .models import Order

SLEEP_S = 0.3


@pytest.fixture
def pg(postgres_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    with postgres_orders(postgres_engines, [f"c{i}" for i in range(40)]) as engines:
        yield engines


def _sleeping(seconds: float) -> object:
    return (
        select(func.count())
        .select_from(Order)
        .where(text(f"(SELECT 1 FROM pg_sleep({seconds})) = 1"))
    )


def test_one_statement_per_shard_at_a_time_with_a_concurrency_of_one(
    pg: dict[str, Engine],
) -> None:
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
                        [DATABASES, "%pg_sleep%"],
                    )
                    for name, active in cursor.fetchall():
                        peak[name] = max(peak.get(name, 0), active)
                    watching.set()
                    time.sleep(0.01)
        finally:
            admin.close()

    counts: list[int] = []
    errors: list[BaseException] = []

    def fan_out() -> None:
        try:
            with sharded_session(pg, fan_out_concurrency=1) as session:
                counts.append(session.on_all_shards(_sleeping(SLEEP_S)).scalar_one())
        except BaseException as exc:  # reported below
            errors.append(exc)

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
    assert not errors and counts == [40, 40]
    assert peak and max(peak.values()) == 1, peak  # the second fan-out waited, shard by shard
    assert all(engine.pool.checkedout() == 0 for engine in pg.values())  # all returned


def test_connections_go_back_to_the_engine_pools_after_a_timeout(
    pg: dict[str, Engine],
) -> None:
    with (
        sharded_session(pg, fan_out_timeout=0.5, fan_out_concurrency=1) as session,
        pytest.raises(FanOutTimeoutError),
    ):
        session.on_all_shards(_sleeping(5)).scalar_one()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(e.pool.checkedout() for e in pg.values()):
        time.sleep(0.05)
    assert [engine.pool.checkedout() for engine in pg.values()] == [0, 0, 0, 0]
    with sharded_session(pg) as session:
        assert session.on_all_shards(select(func.count()).select_from(Order)).scalar() == 40


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", 10_000])
def test_a_bad_concurrency_is_refused(sqlite_shards: dict[str, Engine], bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="fan_out_concurrency"):
        sharded_session(sqlite_shards, fan_out_concurrency=bad)  # type: ignore[arg-type]
