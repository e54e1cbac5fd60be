"""bulk_insert: Core inserts grouped per shard, one executemany each."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from uid_fields.sqlalchemy import ShardKeyError, bulk_insert, sharded_session

from .conftest import SHARDS, recording
from .models import Item, Order, Photo, order_ids

pytestmark = pytest.mark.versions


def test_bulk_insert_through_the_session_runs_one_insert_per_shard(
    shards: dict[str, Engine],
) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        ids = bulk_insert(session, Order, [{"customer": f"c{i}"} for i in range(2000)])
        session.commit()
        assert log.count(kind="INSERT") == 4
        assert {name: log.count(name, "INSERT") for name in SHARDS} == dict.fromkeys(SHARDS, 1)
    assert len(set(ids)) == 2000 and ids == sorted(ids)  # one batch from one generator
    with sharded_session(shards) as session:
        some = ids[::250]
        found = session.scalars(select(Order).where(Order.id.in_(some))).all()
        assert sorted(o.id for o in found) == some


def test_bulk_insert_on_engines_keeps_given_ids_and_shard_keys(
    sqlite_shards: dict[str, Engine],
) -> None:
    given = order_ids.next_id()
    with recording(sqlite_shards) as log:
        ids = bulk_insert(sqlite_shards, Order.__table__, [{"id": given}, {"customer": "x"}])
        assert ids[0] == given
        photo_ids = bulk_insert(sqlite_shards, Photo, [{"owner_id": 42} for _ in range(30)])
        assert log.count(kind="INSERT") <= 3  # 1 or 2 for orders, 1 for one owner's photos
    with sharded_session(sqlite_shards) as session:
        assert {
            session.shard_of(p) for p in session.on_all_shards(select(Photo)).scalars().all()
        } == {
            session.router.table_route(Photo.__table__).shard_of(photo_ids[0])  # type: ignore[union-attr, arg-type]
        }


def test_bulk_insert_of_children_routes_by_parent(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session:
        parents = bulk_insert(session, Order, [{} for _ in range(8)])
        bulk_insert(session, Item, [{"order_id": p, "line": 1} for p in parents])
        session.commit()
    with sharded_session(sqlite_shards) as session:
        for parent in parents:
            assert [i.line for i in session.get(Order, parent).items] == [1]  # type: ignore[union-attr]


def test_bulk_insert_refuses_rows_it_cannot_route(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session, recording(sqlite_shards) as log:
        with pytest.raises(ShardKeyError):
            bulk_insert(session, Photo, [{"caption": "no owner"}])
        with pytest.raises(ShardKeyError):
            bulk_insert(session, Photo, [{"owner_id": "seven"}])
        assert log.count() == 0


def test_bulk_insert_on_engines_commits_no_shard_unless_every_shard_succeeded(
    sqlite_shards: dict[str, Engine],
) -> None:
    bulk_insert(sqlite_shards, Order, [{"customer": f"first {i}"} for i in range(40)])
    with sharded_session(sqlite_shards) as session:
        stored = session.on_all_shards(select(Order)).scalars().all()
        last = next(o.id for o in stored if session.shard_of(o) == SHARDS[-1])
    # Shards insert in order; the repeated id fails on the last one, after the others.
    rows = [{"customer": f"c{i}"} for i in range(40)] + [{"id": last, "customer": "dup"}]
    with pytest.raises(IntegrityError):
        bulk_insert(sqlite_shards, Order, rows)
    with sharded_session(sqlite_shards) as session:
        assert session.on_all_shards(select(func.count()).select_from(Order)).scalar() == 40
