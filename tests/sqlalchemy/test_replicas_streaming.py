"""Read replicas against a real PostgreSQL streaming replica.

The test starts a primary cluster and a hot standby of it (``pg_basebackup -R``) on free
loopback ports. The standby is read-only and replays the primary's WAL a moment later:
exactly what read-your-writes must hide.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from tests.postgres_servers import postgres_cluster, streaming_replica, wait_for_replay
from uid_fields.sqlalchemy import sharded_session

from .conftest import recording
from .models import Base, Order


def _url(base: str) -> str:
    return base.replace("postgresql://", "postgresql+psycopg://")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Engine]]:
    with postgres_cluster() as primary:
        urls = {name: primary.create_database(f"rep_{name}") for name in ("shard_0", "shard_1")}
        engines = {name: create_engine(_url(url)) for name, url in urls.items()}
        for engine in engines.values():
            Base.metadata.create_all(engine)
        with streaming_replica(primary) as standby:
            replica = create_engine(_url(standby.database_url("rep_shard_1")))
            engines["replica"] = replica
            engines["urls"] = (urls["shard_1"], standby.database_url("rep_shard_1"))  # type: ignore[assignment]
            yield engines
            replica.dispose()
        for name in ("shard_0", "shard_1"):
            engines[name].dispose()


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_reads_come_from_the_standby_once_the_pin_runs_out(servers: dict[str, Engine]) -> None:
    shards = {name: servers[name] for name in ("shard_0", "shard_1")}
    replica = servers["replica"]
    primary_url, replica_url = servers["urls"]  # type: ignore[misc]
    with replica.connect() as connection, pytest.raises(DBAPIError, match="read-only"):
        connection.execute(text("CREATE TABLE nope (id int)"))  # a real standby
    clock = Clock()
    engines = {**shards, "replica": replica}
    with sharded_session(
        shards, replicas={"shard_1": [replica]}, read_your_writes_seconds=2, clock=clock
    ) as session:
        orders = [Order(customer=f"c{i}") for i in range(20)]
        session.add_all(orders)
        session.commit()
        ids = [o.id for o in orders if session.shard_of(o) == "shard_1"]
        assert ids
        session.expunge_all()
        with recording(engines) as log:  # right after the write: the primary answers
            assert all(session.get(Order, i) is not None for i in ids)
        assert log.count("replica") == 0
        session.commit()
        clock.now += 2.5
        wait_for_replay(primary_url, replica_url)
        session.expunge_all()
        with recording(engines) as log:
            found = [session.get(Order, i) for i in ids]
        assert all(o is not None for o in found)
        assert log.count("replica", "SELECT") == len(ids) and log.count("shard_1") == 0
        with recording(engines) as log:  # a parallel fan-out of columns reads it too
            found_ids = session.on_all_shards(select(Order.id)).scalars().all()
        assert set(ids) <= set(found_ids)
        assert log.count("replica", "SELECT") == 1 and log.count("shard_1") == 0
        found[0].customer = "edited"  # type: ignore[union-attr]
        session.commit()  # the standby would refuse it: it goes to the primary
        session.expunge_all()
        edited = session.get(Order, ids[0])  # pinned again by that write
        assert edited is not None and edited.customer == "edited"
