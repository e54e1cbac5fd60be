"""``fan_out_concurrency`` holds for a fan-out of objects as for one of columns: with 0
every statement runs on the calling thread, one shard after another."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine

from uid_fields.sqlalchemy import sharded_session

from .conftest import postgres_orders
from .models import Order

pytestmark = pytest.mark.versions


@pytest.fixture
def pg(postgres_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    with postgres_orders(postgres_engines, [f"c{i}" for i in range(20)]) as engines:
        yield engines


@pytest.mark.parametrize("statement", [select(Order), select(Order.id)], ids=["objects", "ids"])
def test_a_concurrency_of_zero_runs_every_shard_on_the_calling_thread(
    pg: dict[str, Engine], statement: Any
) -> None:
    threads: list[str] = []

    def record(*args: Any) -> None:  # also keeps the fan-out off the one-thread send
        threads.append(threading.current_thread().name)

    for engine in pg.values():
        event.listen(engine, "before_cursor_execute", record)
    try:
        with sharded_session(pg, fan_out_concurrency=0) as session:
            assert len(session.on_all_shards(statement).all()) == 20
    finally:
        for engine in pg.values():
            event.remove(engine, "before_cursor_execute", record)
    assert threads and set(threads) == {threading.current_thread().name}
