"""Read replicas per shard through the session: reads to a replica, writes, locked reads
and reads right after a write to the primary.

Here each "replica" is a second engine on the shard's own SQLite file (a replica with no
lag): the routing is what is checked. ``test_replicas_streaming.py`` runs the same
against a real PostgreSQL streaming replica.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.engine import Engine

from uid_fields.sqlalchemy import sharded_session

from .conftest import recording
from .models import Order


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def replica(sqlite_shards: dict[str, Engine]) -> Iterator[Engine]:
    engine = create_engine(sqlite_shards["shard_1"].url)  # the same file, another engine
    yield engine
    engine.dispose()


def on_shard_1(session: object) -> Order:
    while True:
        order = Order(customer="c")
        if session.shard_of(order) == "shard_1":  # type: ignore[attr-defined]
            return order


def test_reads_go_to_the_replica_writes_and_fresh_writes_to_the_primary(
    sqlite_shards: dict[str, Engine], replica: Engine
) -> None:
    clock = Clock()
    engines = {**sqlite_shards, "replica": replica}
    with sharded_session(
        sqlite_shards, replicas={"shard_1": [replica]}, read_your_writes_seconds=5, clock=clock
    ) as session:
        order = on_shard_1(session)
        session.add(order)
        session.commit()
        order_id = order.id
        session.expunge_all()
        with recording(engines) as log:  # just written: pinned to the primary
            assert session.get(Order, order_id) is not None
        assert log.engines_used("SELECT") == {"shard_1"}
        session.commit()
        clock.now += 5.1  # the pin has run out
        session.expunge_all()
        with recording(engines) as log:
            found = session.get(Order, order_id)
            assert found is not None
            others = session.on_all_shards(select(Order)).scalars().all()
        assert log.count("shard_1", "SELECT") == 0 and log.count("replica", "SELECT") == 2
        assert order_id in {o.id for o in others}
        with recording(engines) as log:
            found.customer = "changed"
            session.commit()  # the row read from the replica is written to its primary
        assert log.count("replica") == 0 and log.count("shard_1", "UPDATE") == 1
        clock.now += 10
        with recording(engines) as log:
            session.execute(select(Order).where(Order.id == order_id).with_for_update())
        assert log.count("replica") == 0  # a locking read needs the primary


def test_a_transaction_that_wrote_to_a_shard_reads_it_there(
    sqlite_shards: dict[str, Engine], replica: Engine
) -> None:
    engines = {**sqlite_shards, "replica": replica}
    with sharded_session(
        sqlite_shards, replicas={"shard_1": [replica]}, read_your_writes_seconds=0
    ) as session:
        order = on_shard_1(session)
        session.add(order)
        session.flush()  # not committed: only the primary's connection can see it
        order_id = order.id
        session.expunge_all()
        with recording(engines) as log:
            assert session.get(Order, order_id) is not None
        assert log.count("replica") == 0
        session.commit()
        session.expunge_all()
        with recording(engines) as log:  # a new transaction, no pin (0 s): the replica
            assert session.get(Order, order_id) is not None
        assert log.count("replica", "SELECT") == 1


def test_replicas_must_belong_to_shards(sqlite_shards: dict[str, Engine]) -> None:
    with pytest.raises(ValueError, match="not shards"):
        sharded_session(sqlite_shards, replicas={"elsewhere": [sqlite_shards["shard_0"]]})
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="pin seconds"):
            sharded_session(sqlite_shards, read_your_writes_seconds=bad)
