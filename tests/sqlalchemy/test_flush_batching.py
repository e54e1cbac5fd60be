"""A flush over several shards runs one batched INSERT per shard, not one per row."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from uid_fields.sqlalchemy import sharded_session

from .conftest import SHARDS, recording
from .models import Item, Order, Photo

pytestmark = pytest.mark.versions


def test_1000_objects_over_4_shards_take_at_most_8_inserts(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        orders = [Order(customer=f"c{i}") for i in range(1000)]
        session.add_all(orders)  # interleaved shards: SQLAlchemy alone would run 1000
        session.commit()
        inserts = log.count(kind="INSERT")
        assert inserts <= 8, inserts
        assert log.engines_used(kind="INSERT") == set(SHARDS)
        for name in SHARDS:
            assert log.count(name, "INSERT") <= 2
    with sharded_session(shards) as session:
        counted = session.on_all_shards(select(func.count()).select_from(Order)).scalar()
        assert counted == 1000  # one count per shard, added up


def test_children_and_parents_batch_per_shard(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        orders = [Order(items=[Item(line=1), Item(line=2)]) for _ in range(200)]
        session.add_all(orders)
        seventh = orders[7].id
        session.commit()
        # per shard: one INSERT for its orders, one for its items
        assert log.count(kind="INSERT") <= 2 * len(SHARDS) * 2
    with sharded_session(shards) as session:
        order = session.get(Order, seventh)
        assert order is not None and [i.line for i in order.items] == [1, 2]


def test_shard_key_rows_batch_per_owner_shard(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        session.add_all(Photo(owner_id=owner % 97) for owner in range(500))
        session.commit()
        assert log.count(kind="INSERT") <= 8


def test_flush_keeps_insertion_order_within_a_shard(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session:
        orders = [Order(customer=f"{i:03}") for i in range(60)]
        session.add_all(orders)
        session.commit()
        shard = session.shard_of(orders[0])
    with sqlite_shards[shard].connect() as connection:
        rows = connection.exec_driver_sql("SELECT customer FROM orders ORDER BY rowid").all()
    customers = [r[0] for r in rows]
    assert customers == sorted(customers)
