"""Ids the caller gives: a new object's id must agree with its shard key, and a stored
row's id may not change to one that names another database.

The core decides both (``uid_fields.placement.new_objects``); these tests hold the
SQLAlchemy adapter to it on every path: the session, ``bulk_insert`` and Core statements
through one engine (the write guard).
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Engine

from uid_fields import ShardKeyError, WrongShardError
from uid_fields.placement import Placement, allow_off_shard_writes
from uid_fields.sqlalchemy import bulk_insert, sharded_session

from .conftest import SHARDS
from .models import Order, Photo, order_ids

OWNER = 7


def _photo_placement(shards: dict[str, Engine]) -> Placement:
    with sharded_session(shards) as session:
        route = session.router.table_route(Photo.__table__)  # type: ignore[arg-type]
        assert route is not None
        return route.placement


def _foreign_id(placement: Placement, owner: int = OWNER) -> tuple[int, int]:
    """An id made for another key whose rows live on another database than ``owner``'s."""
    home = placement.database_for_key(owner)
    other = next(k for k in range(1000) if placement.database_for_key(k) != home)
    return placement.new_id(other), other


def _photos_on(engine: Engine) -> list[tuple[int, int]]:
    with engine.connect() as connection:
        rows = connection.execute(select(Photo.__table__.c.id, Photo.__table__.c.owner_id))
        return [(row[0], row[1]) for row in rows]


def _all_photos(shards: dict[str, Engine]) -> dict[str, list[tuple[int, int]]]:
    return {name: _photos_on(engine) for name, engine in shards.items()}


# -- item 2: a new object's explicit id against its shard key --------------------------
@pytest.mark.parametrize("order", ["id first", "key first", "id set later"])
def test_an_explicit_id_off_its_keys_database_is_refused(
    shards: dict[str, Engine], order: str
) -> None:
    placement = _photo_placement(shards)
    given, _other = _foreign_id(placement)
    if order == "id first":
        photo = Photo(id=given, owner_id=OWNER)
    elif order == "key first":
        photo = Photo(owner_id=OWNER, id=given)
    else:
        photo = Photo(owner_id=OWNER)
        photo.id = given
    assert photo.id == given  # the caller's id is never replaced
    with sharded_session(shards) as session:
        session.add(photo)
        with pytest.raises(WrongShardError) as caught:
            session.flush()
        message = str(caught.value)
        assert str(given) in message and f"owner_id={OWNER}" in message
        assert placement.database_of(given) in message
        assert placement.database_for_key(OWNER) in message
        assert caught.value.expected == placement.database_for_key(OWNER)
        assert photo.id == given
    assert not any(_all_photos(shards).values())  # nothing was written anywhere


def test_an_explicit_id_that_agrees_with_its_key_is_kept(shards: dict[str, Engine]) -> None:
    placement = _photo_placement(shards)
    given = placement.new_id(OWNER)
    with sharded_session(shards) as session:
        session.add(Photo(id=given, owner_id=OWNER))
        session.commit()
    home = placement.database_for_key(OWNER)
    assert _photos_on(shards[home]) == [(given, OWNER)]
    with sharded_session(shards) as session:
        found = session.scalars(select(Photo).where(Photo.owner_id == OWNER)).all()
        assert [p.id for p in found] == [given]


def test_allow_off_shard_writes_lets_a_mismatch_through_as_given(
    shards: dict[str, Engine],
) -> None:
    placement = _photo_placement(shards)
    given, _other = _foreign_id(placement)
    with allow_off_shard_writes(), sharded_session(shards) as session:
        session.add(Photo(id=given, owner_id=OWNER))
        session.commit()
        bulk_insert(session, Photo, [{"id": given + 1, "owner_id": OWNER}])
        session.commit()
    assert _photos_on(shards[placement.database_of(given)]) == [
        (given, OWNER),
        (given + 1, OWNER),
    ]


def test_ids_the_field_made_follow_a_changed_key(shards: dict[str, Engine]) -> None:
    placement = _photo_placement(shards)
    _given, other = _foreign_id(placement)
    photo = Photo(owner_id=other)
    made = photo.id
    photo.owner_id = OWNER  # the field's own id is made again for the new key
    assert photo.id != made
    with sharded_session(shards) as session:
        session.add(photo)
        session.commit()
        assert session.shard_of(photo) == placement.database_for_key(OWNER)


def test_neither_id_nor_key_is_a_shard_key_error(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        session.add(Photo(caption="x"))
        with pytest.raises(ShardKeyError, match="owner_id"):
            session.flush()


def test_bulk_insert_refuses_a_row_whose_id_disagrees_with_its_key(
    shards: dict[str, Engine],
) -> None:
    placement = _photo_placement(shards)
    given, _other = _foreign_id(placement)
    kept = placement.new_id(OWNER)
    rows = [
        {"owner_id": OWNER},  # neither: an id is made
        {"id": kept, "owner_id": OWNER},  # consistent: kept
        {"id": given, "owner_id": OWNER},  # a mismatch
    ]
    with sharded_session(shards) as session:
        with pytest.raises(WrongShardError, match=str(given)):
            bulk_insert(session, Photo, rows)
        session.rollback()
    assert not any(_all_photos(shards).values())
    made = bulk_insert(shards, Photo, rows[:2])
    assert made[1] == kept
    home = placement.database_for_key(OWNER)
    assert sorted(_photos_on(shards[home])) == sorted((i, OWNER) for i in made)


def test_core_insert_through_one_engine_checks_the_key(shards: dict[str, Engine]) -> None:
    placement = _photo_placement(shards)
    given, _other = _foreign_id(placement)
    with sharded_session(shards):  # installs the write guard on the engines
        pass
    there = shards[placement.database_of(given)]
    with pytest.raises(WrongShardError, match=f"owner_id={OWNER}"), there.begin() as connection:
        connection.execute(insert(Photo).values(id=given, owner_id=OWNER))
    assert not any(_all_photos(shards).values())


# -- item 3: changing a stored id -----------------------------------------------------
def _order_ids_by_shard(shards: dict[str, Engine], old: int) -> tuple[int, int]:
    """An id on ``old``'s database and one on another database."""
    with sharded_session(shards) as session:
        route = session.router.table_route(Order.__table__)  # type: ignore[arg-type]
        assert route is not None
        home = route.shard_of(old)
        ids = order_ids.next_ids(200)
        same = next(i for i in ids if route.shard_of(i) == home and i != old)
        other = next(i for i in ids if route.shard_of(i) != home)
    return same, other


def _store_order(shards: dict[str, Engine]) -> int:
    with sharded_session(shards) as session:
        order = Order(customer="c")
        session.add(order)
        session.commit()
        return order.id


def _order_count(shards: dict[str, Engine]) -> int:
    total = 0
    for engine in shards.values():
        with engine.connect() as connection:
            total += connection.execute(select(func.count()).select_from(Order)).scalar_one()
    return total


def test_an_orm_pk_change_to_another_database_is_refused(shards: dict[str, Engine]) -> None:
    old = _store_order(shards)
    _same, other = _order_ids_by_shard(shards, old)
    with sharded_session(shards) as session:
        order = session.get(Order, old)
        assert order is not None
        order.id = other
        with pytest.raises(WrongShardError, match=str(other)):
            session.commit()
        session.rollback()
    with sharded_session(shards) as session:
        assert session.get(Order, old) is not None  # the row is still found by its id
        assert session.get(Order, other) is None
    assert _order_count(shards) == 1


def test_an_orm_pk_change_on_the_same_database_is_allowed(shards: dict[str, Engine]) -> None:
    old = _store_order(shards)
    same, _other = _order_ids_by_shard(shards, old)
    with sharded_session(shards) as session:
        order = session.get(Order, old)
        assert order is not None
        order.id = same
        session.commit()
    with sharded_session(shards) as session:
        assert session.get(Order, old) is None
        found = session.get(Order, same)
        assert found is not None and found.customer == "c"


def test_core_updates_of_an_id_are_checked_by_the_guard(shards: dict[str, Engine]) -> None:
    old = _store_order(shards)
    same, other = _order_ids_by_shard(shards, old)
    with sharded_session(shards) as session:
        route = session.router.table_route(Order.__table__)  # type: ignore[arg-type]
        assert route is not None
        home = shards[route.shard_of(old)]
        # Through the session: routed to the row's shard by its id, then refused there.
        with pytest.raises(WrongShardError, match=str(other)):
            session.execute(update(Order).where(Order.id == old).values(id=other))
        session.rollback()
    with pytest.raises(WrongShardError, match=str(other)), home.begin() as connection:
        connection.execute(update(Order).where(Order.id == old).values(id=other))
    with pytest.raises(WrongShardError), home.begin() as connection:
        connection.execute(update(Order).where(Order.id == old), [{"id": other}])
    with allow_off_shard_writes(), home.begin() as connection:  # the opt-out still works
        connection.execute(
            update(Order).where(Order.id == old).values(customer="checked only for ids")
        )
    with home.begin() as connection:  # a new id on the same database is fine
        connection.execute(update(Order).where(Order.id == old).values(id=same))
    with sharded_session(shards) as session:
        found = session.get(Order, same)
        assert found is not None and found.customer == "checked only for ids"
        assert session.get(Order, other) is None
    assert _order_count(shards) == 1
    assert set(SHARDS) == set(shards)
