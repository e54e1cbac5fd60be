"""INSERTs through one engine store only the rows whose ids name that engine's shard."""

from __future__ import annotations

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine

from uid_fields import WrongShardError
from uid_fields.sqlalchemy import check_writes, sharded_session

from .conftest import SHARDS
from .models import Order, order_ids


def _count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(Order)).scalar_one())


def _shard_of(shards: dict[str, Engine], value: int) -> str:
    with sharded_session(shards) as session:
        route = session.router.table_route(Order.__table__)  # type: ignore[arg-type]
        assert route is not None
        return route.shard_of(value)


def test_core_inserts_through_one_engine_are_checked(shards: dict[str, Engine]) -> None:
    check_writes(shards)
    engine = shards["shard_0"]
    with pytest.raises(WrongShardError, match="shard_0"), engine.begin() as connection:
        connection.execute(insert(Order), [{"customer": str(i)} for i in range(100)])
    assert _count(engine) == 0  # nothing was written
    ids = order_ids.next_ids(200)
    mine = [i for i in ids if _shard_of(shards, i) == "shard_0"]
    stray = next(i for i in ids if _shard_of(shards, i) != "shard_0")
    with engine.begin() as connection:
        connection.execute(insert(Order), [{"id": i} for i in mine])
    assert _count(engine) == len(mine)
    with pytest.raises(WrongShardError), engine.begin() as connection:
        connection.execute(insert(Order).values(id=stray))
    assert sum(_count(shards[name]) for name in SHARDS) == len(mine)


def test_a_sharded_session_checks_its_engines(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        order = Order()
        home = session.shard_of(order)
    other = next(name for name in SHARDS if name != home)
    with pytest.raises(WrongShardError), shards[other].begin() as connection:
        connection.execute(insert(Order).values(id=order.id))
    with shards[home].begin() as connection:
        connection.execute(insert(Order).values(id=order.id))
    assert _count(shards[home]) == 1


def test_audit_finds_rows_written_off_their_shard(shards: dict[str, Engine]) -> None:
    from uid_fields.sqlalchemy import allow_off_shard_writes, audit

    from .models import Photo

    with sharded_session(shards) as session:
        session.add_all([Order() for _ in range(20)] + [Photo(owner_id=3) for _ in range(5)])
        session.commit()
        assert sum(r.misplaced for r in audit(session, Order)) == 0
        stray_order, stray_photo = Order(), Photo(owner_id=4)
        order_home, photo_home = session.shard_of(stray_order), session.shard_of(stray_photo)
    order_wrong = next(s for s in SHARDS if s != order_home)
    photo_wrong = next(s for s in SHARDS if s != photo_home)
    with allow_off_shard_writes():
        with shards[order_wrong].begin() as connection:
            connection.execute(insert(Order).values(id=stray_order.id))
        with shards[photo_wrong].begin() as connection:
            connection.execute(insert(Photo).values(id=stray_photo.id, owner_id=4))
    with sharded_session(shards) as session:
        orders = {r.database: r for r in audit(session, Order)}
        photos = {r.database: r for r in audit(session, Photo)}
    assert orders[order_wrong].samples == [stray_order.id] and orders[order_wrong].method == "scan"
    assert sum(r.misplaced for r in orders.values()) == 1
    assert photos[photo_wrong].samples == [stray_photo.id] and photos[photo_wrong].method == "sql"
    assert sum(r.misplaced for r in photos.values()) == 1


def test_audit_covers_tables_routed_by_their_parent(shards: dict[str, Engine]) -> None:
    """Items live on their order's shard: one stored elsewhere is found by its order id,
    and reported by its primary key (here (order_id, line))."""
    from uid_fields.sqlalchemy import allow_off_shard_writes, audit

    from .models import Item

    with sharded_session(shards) as session:
        orders = [Order() for _ in range(6)]
        session.add_all(orders)
        session.flush()
        session.add_all(Item(order_id=o.id, line=1) for o in orders)
        session.commit()
        assert {r.database for r in audit(session, Item)} == set(SHARDS)
        assert sum(r.misplaced for r in audit(session, Item)) == 0
        stray = Order()
        home = session.shard_of(stray)
    wrong = next(s for s in SHARDS if s != home)
    with allow_off_shard_writes(), shards[wrong].begin() as connection:
        connection.execute(insert(Order).values(id=stray.id))  # the parent too: its key holds
        connection.execute(insert(Item).values(order_id=stray.id, line=7))
    with sharded_session(shards) as session:
        found = {r.database: r for r in audit(session, Item)}
    assert found[wrong].misplaced == 1 and found[wrong].samples == [(stray.id, 7)]
    assert sum(r.misplaced for r in found.values()) == 1
