"""Sharded session routing: one engine for get(), only the shards named by id criteria."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.ext.horizontal_shard import set_shard_id

from uid_fields.sqlalchemy import ShardKeyError, ShardRoutingError, sharded_session

from .conftest import SHARDS, recording
from .models import Event, Item, Order, Photo, Tag

pytestmark = pytest.mark.versions


def _orders_on_every_shard(session_shards: dict[str, Engine]) -> dict[str, list[int]]:
    """Enough orders that every shard holds some; returns ids per shard."""
    with sharded_session(session_shards) as session:
        orders = [Order(customer=f"c{i}") for i in range(40)]
        session.add_all(orders)
        session.commit()
        placed: dict[str, list[int]] = {}
        for order in orders:
            placed.setdefault(session.shard_of(order), []).append(order.id)
    assert set(placed) == set(SHARDS)
    return placed


def test_get_runs_one_select_on_one_engine(shards: dict[str, Engine]) -> None:
    placed = _orders_on_every_shard(shards)
    for shard, ids in placed.items():
        with sharded_session(shards) as session, recording(shards) as log:
            order = session.get(Order, ids[0])
            assert order is not None and order.id == ids[0]
            assert log.count(kind="SELECT") == 1
            assert log.engines_used() == {shard}
            assert session.get(Order, ids[0]) is order  # identity map: no second query
            assert log.count() == 1


def test_get_of_a_missing_id_asks_only_its_shard(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        assert session.get(Order, Order().id) is None
        assert log.count() == 1


def test_equality_and_in_criteria_go_only_to_the_shards_involved(
    shards: dict[str, Engine],
) -> None:
    placed = _orders_on_every_shard(shards)
    one = placed["shard_2"][0]
    with sharded_session(shards) as session, recording(shards) as log:
        found = session.scalars(select(Order).where(Order.id == one)).all()
        assert [o.id for o in found] == [one]
        assert log.engines_used() == {"shard_2"}

        log.clear()
        wanted = placed["shard_0"][:2] + placed["shard_3"][:1]
        found = session.scalars(select(Order).where(Order.id.in_(wanted))).all()
        assert sorted(o.id for o in found) == sorted(wanted)
        assert log.engines_used() == {"shard_0", "shard_3"}
        assert log.count() == 2

        log.clear()
        either = (Order.id == placed["shard_1"][0]) | (Order.id == placed["shard_3"][0])
        assert len(session.scalars(select(Order).where(either)).all()) == 2
        assert log.engines_used() == {"shard_1", "shard_3"}

        log.clear()
        both = (Order.id.in_(wanted)) & (Order.customer != "nobody")
        assert len(session.scalars(select(Order).where(both)).all()) == 3
        assert log.engines_used() == {"shard_0", "shard_3"}


def test_queries_without_id_criteria_fan_out_when_asked(shards: dict[str, Engine]) -> None:
    placed = _orders_on_every_shard(shards)
    with sharded_session(shards) as session, recording(shards) as log:
        with pytest.raises(ShardRoutingError, match="on_all_shards"):
            session.scalars(select(Order).where(Order.customer.like("c%"))).all()
        assert log.count() == 0  # refused before anything ran
        found = session.on_all_shards(select(Order).where(Order.customer.like("c%")))
        rows = found.scalars().all()
        assert len(rows) == sum(len(ids) for ids in placed.values())
        assert [o.id for o in rows] == sorted(o.id for o in rows)  # merged in id order
        assert log.engines_used() == set(SHARDS)
        assert log.count() == 4
        # an OR with an unroutable branch cannot be confined either
        log.clear()
        loose = (Order.id == placed["shard_0"][0]) | (Order.customer == "c1")
        session.scalars(select(Order).where(loose).execution_options(uid_fields_fan_out=True))
        assert log.engines_used() == set(SHARDS)


def test_bulk_update_and_delete_by_id_touch_one_shard(shards: dict[str, Engine]) -> None:
    placed = _orders_on_every_shard(shards)
    target = placed["shard_1"][0]
    with sharded_session(shards) as session, recording(shards) as log:
        session.execute(update(Order).where(Order.id == target).values(customer="renamed"))
        session.execute(delete(Order).where(Order.id == placed["shard_1"][1]))
        session.commit()
        assert log.engines_used(kind="UPDATE") == {"shard_1"}
        assert log.engines_used(kind="DELETE") == {"shard_1"}
    with sharded_session(shards) as session:
        assert session.get(Order, target).customer == "renamed"  # type: ignore[union-attr]
        assert session.get(Order, placed["shard_1"][1]) is None


def test_lazy_loads_stay_on_the_parents_shard(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        orders = [Order(items=[Item(line=n, sku=f"s{n}") for n in range(3)]) for _ in range(8)]
        session.add_all(orders)
        session.commit()
        ids = {o.id: session.shard_of(o) for o in orders}
    for order_id, shard in ids.items():
        with sharded_session(shards) as session, recording(shards) as log:
            order = session.get(Order, order_id)
            assert order is not None
            assert [item.line for item in order.items] == [0, 1, 2]
            assert log.count(kind="SELECT") == 2
            assert log.engines_used() == {shard}
            # many-to-one back to the parent: found in the identity map, no query
            log.clear()
            assert order.items[0].order is order
            assert log.count() == 0


def test_children_routed_by_their_parent(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        orders = [Order(items=[Item(line=1)]) for _ in range(8)]
        session.add_all(orders)
        session.commit()
        where = {o.id: session.shard_of(o) for o in orders}
        for order in orders:
            assert session.shard_of(order.items[0]) == where[order.id]
    order_id, shard = next(iter(where.items()))
    with sharded_session(shards) as session, recording(shards) as log:
        item = session.get(Item, (order_id, 1))
        assert item is not None and item.order_id == order_id
        assert log.engines_used() == {shard} and log.count() == 1
        log.clear()
        session.scalars(select(Item).where(Item.order_id == order_id)).all()
        assert log.engines_used() == {shard}


def test_rows_of_one_shard_key_share_one_engine(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        photos = [
            Photo(owner_id=owner, caption=str(n))
            for owner in (3, 4000, 8000, 1, 2, 5)
            for n in range(10)
        ]
        session.add_all(photos)
        session.commit()
        by_owner: dict[int, set[str]] = {}
        for photo in photos:
            by_owner.setdefault(photo.owner_id, set()).add(session.shard_of(photo))
    assert all(len(engines) == 1 for engines in by_owner.values())
    assert len({next(iter(e)) for e in by_owner.values()}) > 1  # owners spread out
    with sharded_session(shards) as session, recording(shards) as log:
        mine = session.scalars(select(Photo).where(Photo.owner_id == 4000)).all()
        assert len(mine) == 10
        assert log.engines_used() == by_owner[4000]


def test_locality_uuids_route_by_their_block(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        events = [Event(name=str(n)) for n in range(20)]
        session.add_all(events)
        session.commit()
        where = {e.id: session.shard_of(e) for e in events}
    assert len(set(where.values())) > 1
    with sharded_session(shards) as session, recording(shards) as log:
        for event_id, shard in where.items():
            log.clear()
            assert session.get(Event, str(event_id)) is not None  # the string form works too
            assert log.engines_used() == {shard}


def test_many_to_many_rows_on_one_shard(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        order = Order()
        shard = session.shard_of(order)
        tag = Tag(label="red")
        session.add(order)
        session.flush()
        # a tag that lands on the order's shard
        while session.router.table_route(Tag.__table__).shard_of(tag.id) != shard:  # type: ignore[union-attr, arg-type]
            tag = Tag(label="red")
        order.tags.append(tag)
        session.commit()
        order_id = order.id
    with sharded_session(shards) as session:
        assert [t.label for t in session.get(Order, order_id).tags] == ["red"]  # type: ignore[union-attr]


def test_many_to_many_over_several_shards_is_refused(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session:
        orders = [Order() for _ in range(12)]
        assert len({session.shard_of(o) for o in orders}) > 1
        for order in orders:
            order.tags.append(Tag())
        session.add_all(orders)
        with pytest.raises(ShardRoutingError, match="many-to-many"):
            session.flush()


def test_objects_without_an_id_get_one_or_are_refused(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session:
        order = Order()
        order.id = None  # type: ignore[assignment]
        session.add(order)
        session.flush()
        assert isinstance(order.id, int)
        photo = Photo(caption="no owner")
        assert photo.id is None
        session.add(photo)
        with pytest.raises(ShardKeyError, match="owner_id"):
            session.flush()


def test_statements_that_cannot_be_routed_are_refused(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        with pytest.raises(ShardRoutingError, match="bulk_insert"):
            session.execute(insert(Order).values(customer="x"))
        assert session.get(Order, -1) is None  # as for a missing row
        with pytest.raises(ValueError, match="not an id"):
            session.scalars(select(Order).where(Order.id == "12x")).all()
        assert log.count() == 0


def test_explicit_shard_pins_still_win(shards: dict[str, Engine]) -> None:
    placed = _orders_on_every_shard(shards)
    with sharded_session(shards) as session, recording(shards) as log:
        rows = session.scalars(select(Order).options(set_shard_id("shard_3"))).all()
        assert sorted(o.id for o in rows) == sorted(placed["shard_3"])
        assert log.engines_used() == {"shard_3"}


def test_a_many_to_many_row_across_shards_is_refused(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session:
        order = Order()
        session.add(order)
        session.commit()
        shard = session.shard_of(order)
        tag = Tag(label="blue")
        while session.router.table_route(Tag.__table__).shard_of(tag.id) == shard:  # type: ignore[union-attr, arg-type]
            tag = Tag(label="blue")
        session.add(tag)
        session.commit()
        order.tags.append(tag)
        with pytest.raises(ShardRoutingError, match="no load could read it back"):
            session.flush()


@pytest.mark.parametrize("bad", [-1, 2**64, "abc", "12a"])
def test_get_of_a_value_that_is_no_id_finds_none(
    sqlite_shards: dict[str, Engine], bad: object
) -> None:
    with sharded_session(sqlite_shards) as session, recording(sqlite_shards) as log:
        assert session.get(Order, bad) is None
        assert session.get(Event, "not-a-uuid") is None
        assert log.count() == 0  # nothing sent: no shard can hold it
