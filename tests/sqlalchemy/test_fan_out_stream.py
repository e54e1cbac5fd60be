"""``session.on_all_shards(stmt, execution_options={"yield_per": n})`` streams: each
shard's rows read n at a time (a server-side cursor where the driver has one), merged in
the statement's order holding a chunk per shard, the first row out before the shards'
rows are all read; ``partitions()`` gives chunks of n. The rows are those of the
whole-result merge (which ``test_fan_out_merge`` holds to one database's answer).

Rows read are counted as ``Order`` objects loaded (the mapper's ``load`` event), rows
held as those still alive (weak references).
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine

from uid_fields.ops import parallel
from uid_fields.sqlalchemy import bulk_insert, sharded_session

from .conftest import SHARDS
from .models import Order

pytestmark = pytest.mark.versions

ROWS = 400
CHUNK = 10


@pytest.fixture
def orders(shards: dict[str, Engine]) -> dict[str, Engine]:
    with sharded_session(shards) as session:
        bulk_insert(session, Order, [{"customer": f"c{i % 7}"} for i in range(ROWS)])
        session.commit()
    return shards


class Loaded:
    def __init__(self) -> None:
        self.count = 0
        self.alive: weakref.WeakSet[Order] = weakref.WeakSet()

    def __call__(self, target: Order, context: Any) -> None:
        self.count += 1
        self.alive.add(target)


@pytest.fixture
def loaded() -> Iterator[Loaded]:
    seen = Loaded()
    event.listen(Order, "load", seen)
    yield seen
    event.remove(Order, "load", seen)


def test_yield_per_holds_a_chunk_per_shard(orders: dict[str, Engine], loaded: Loaded) -> None:
    statement = select(Order).order_by(Order.id.desc())
    with sharded_session(orders) as session:
        expected = [o.id for o in session.on_all_shards(statement).scalars()]
        session.expunge_all()
        gc.collect()
        loaded.count = 0
        result = session.on_all_shards(statement, execution_options={"yield_per": CHUNK})
        rows = iter(result.scalars())
        first = next(rows)
        assert first.id == expected[0]
        assert loaded.count <= len(SHARDS) * CHUNK, f"{loaded.count} of {ROWS} read first"
        ids, most = [first.id], 0
        del first
        for order in rows:
            ids.append(order.id)
            del order
            most = max(most, len(loaded.alive))
        assert ids == expected
        assert most <= len(SHARDS) * CHUNK * 2, f"{most} rows held at once"


def test_partitions_come_in_chunks_of_yield_per(orders: dict[str, Engine]) -> None:
    statement = select(Order.id, Order.customer).order_by(Order.id.desc())
    with sharded_session(orders) as session:
        expected = [tuple(row) for row in session.on_all_shards(statement)]
        result = session.on_all_shards(statement, execution_options={"yield_per": CHUNK})
        parts = [[tuple(row) for row in part] for part in result.partitions()]
    assert [row for part in parts for row in part] == expected
    assert len(parts) == ROWS // CHUNK and {len(p) for p in parts} == {CHUNK}


@pytest.mark.parametrize(
    "statement",
    [
        lambda: select(Order).order_by(Order.id.desc()).offset(7).limit(55),
        lambda: select(Order.customer, Order.id).order_by(Order.customer, Order.id.desc()),
        lambda: select(Order),
    ],
    ids=["a page", "by text", "id order"],
)
def test_a_stream_gives_the_rows_of_the_whole_merge(
    orders: dict[str, Engine], statement: Any
) -> None:
    with sharded_session(orders) as session:
        whole = session.on_all_shards(statement()).all()
        expected = [tuple(getattr(v, "id", v) for v in row) for row in whole]
        streamed = session.on_all_shards(statement(), execution_options={"yield_per": 7}).all()
        assert [tuple(getattr(v, "id", v) for v in row) for row in streamed] == expected


def test_a_page_of_objects_loads_only_the_rows_it_returns(
    orders: dict[str, Engine], loaded: Loaded
) -> None:
    """The shards' rows are merged as columns; objects are made of the rows kept only
    (their load event fires once each), in the session under their shard's identity."""
    server = next(iter(orders.values())).dialect.name != "sqlite"
    with sharded_session(orders) as session:
        every = [o.id for o in session.on_all_shards(select(Order)).scalars()]
        session.expunge_all()
        loaded.count = 0
        statement = select(Order).order_by(Order.id.desc()).offset(3).limit(5)
        page = session.on_all_shards(statement).scalars().all()
        assert [o.id for o in page] == sorted(every, reverse=True)[3:8]
        # SQLite shards are read one after another through the session, 8 rows each.
        assert loaded.count == (5 if server else 8 * len(SHARDS))
        assert all(session.get(Order, o.id) is o for o in page)  # no SQL, same objects
        changed = page[0].id
        page[0].customer = "changed"
        session.commit()
        session.expunge_all()
        assert session.get(Order, changed).customer == "changed"  # type: ignore[union-attr]


def test_a_postgresql_page_is_sent_to_every_shard_from_the_calling_thread(
    orders: dict[str, Engine],
) -> None:
    """On PostgreSQL (psycopg 3) a page of objects is compiled once and sent to every
    shard before any answer is read, from the calling thread, on the connections idle in
    the engines' pools (a shard with none is connected to on a pool thread, where the
    deadline holds). With a listener of the engines' statements it keeps the pool
    threads, and the listener sees every shard's statement."""
    if next(iter(orders.values())).dialect.name != "postgresql":
        pytest.skip("sending to every shard at once is psycopg 3's")
    opened: list[str] = []
    taken: list[str] = []

    def record(*args: Any) -> None:
        opened.append(threading.current_thread().name)

    def checkout(*args: Any) -> None:
        taken.append(threading.current_thread().name)

    parallel.shutdown()
    for engine in orders.values():
        engine.dispose()
        event.listen(engine.pool, "connect", record)
        event.listen(engine.pool, "checkout", checkout)
    seen: list[str] = []

    def count(conn: Any, *args: Any) -> None:
        seen.append(str(conn.engine.url.database))

    try:
        statement = select(Order).order_by(Order.id.desc()).limit(6)
        with sharded_session(orders) as session:
            first = [o.id for o in session.on_all_shards(statement).scalars()]
        assert len(opened) == len(SHARDS)  # connected on the pool threads, under the deadline
        assert all(name.startswith("uid_fields-fanout") for name in opened)
        taken.clear()
        with sharded_session(orders) as session:
            page = [o.id for o in session.on_all_shards(statement).scalars()]
        assert page == first and len(page) == 6 and len(opened) == len(SHARDS)
        assert taken == [threading.current_thread().name] * len(SHARDS)
        for engine in orders.values():
            event.listen(engine, "before_cursor_execute", count)
        try:
            with sharded_session(orders) as session:
                again = [o.id for o in session.on_all_shards(statement).scalars()]
        finally:
            for engine in orders.values():
                event.remove(engine, "before_cursor_execute", count)
        assert again == page
        assert len(set(seen)) == len(SHARDS)
    finally:
        for engine in orders.values():
            event.remove(engine.pool, "connect", record)
            event.remove(engine.pool, "checkout", checkout)
        parallel.shutdown()
