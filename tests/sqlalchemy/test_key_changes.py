"""A stored row's shard key may not change to one whose rows live on another database
(issue 35, item 1), through the ORM and through Core statements.

The UPDATE runs where the row is and leaves it there, where a read by the new key never
looks. The core decides (``uid_fields.placement.check_key_change``), for the session's
flush and for the write guard (Core ``update()`` through the session or one engine); a
change that keeps the row on its database is allowed. Each test ends by reading every row
back by its own key.
"""

from __future__ import annotations

import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from uid_fields import WrongShardError
from uid_fields.placement import Placement, allow_off_shard_writes
from uid_fields.sqlalchemy import sharded_session

from .models import Photo

pytestmark = pytest.mark.versions

OWNER = 7


def _placement(shards: dict[str, Engine]) -> Placement:
    with sharded_session(shards) as session:
        route = session.router.table_route(Photo.__table__)  # type: ignore[arg-type]
        assert route is not None
        return route.placement


def _keys(placement: Placement) -> tuple[int, int]:
    """A key whose rows live with ``OWNER``'s, and one whose rows live elsewhere."""
    home = placement.database_for_key(OWNER)
    same = next(k for k in range(OWNER + 1, 5000) if placement.database_for_key(k) == home)
    other = next(k for k in range(OWNER + 1, 5000) if placement.database_for_key(k) != home)
    return same, other


def _store(shards: dict[str, Engine], count: int = 1) -> list[int]:
    with sharded_session(shards) as session:
        photos = [Photo(owner_id=OWNER, caption=str(i)) for i in range(count)]
        session.add_all(photos)
        session.commit()
        return [p.id for p in photos]


def _found_by_their_keys(shards: dict[str, Engine]) -> dict[int, int]:
    """Every photo of every shard, by id, with its key; each one found by its key."""
    stored: dict[int, int] = {}
    for engine in shards.values():
        with engine.connect() as connection:
            table = Photo.__table__
            stored.update(connection.execute(select(table.c.id, table.c.owner_id)).all())  # type: ignore[arg-type]
    with sharded_session(shards) as session:
        for value, key in stored.items():
            found = session.scalars(select(Photo.id).where(Photo.owner_id == key)).all()
            assert value in found, f"photo {value} is lost to its key {key}"
    return stored


def test_an_orm_key_change_to_another_database_is_refused(shards: dict[str, Engine]) -> None:
    placement = _placement(shards)
    same, other = _keys(placement)
    (value,) = _store(shards)
    with sharded_session(shards) as session:
        photo = session.get(Photo, value)
        assert photo is not None
        photo.owner_id = other
        with pytest.raises(WrongShardError, match=f"owner_id={other}") as caught:
            session.commit()
        assert caught.value.database == placement.database_for_key(OWNER)
        assert caught.value.expected == placement.database_for_key(other)
        session.rollback()
    assert _found_by_their_keys(shards) == {value: OWNER}
    with sharded_session(shards) as session:
        photo = session.get(Photo, value)
        assert photo is not None
        photo.owner_id = same  # the same database: allowed
        session.commit()
    assert _found_by_their_keys(shards) == {value: same}


def test_a_core_update_of_the_key_through_the_session_is_refused(
    shards: dict[str, Engine],
) -> None:
    placement = _placement(shards)
    same, other = _keys(placement)
    values = _store(shards, 2)
    with sharded_session(shards) as session:
        with pytest.raises(WrongShardError, match=f"owner_id={other}"):
            session.execute(update(Photo).where(Photo.id == values[0]).values(owner_id=other))
        session.rollback()
        with pytest.raises(WrongShardError):
            session.execute(update(Photo).where(Photo.owner_id == OWNER).values(owner_id=other))
        session.rollback()
    assert _found_by_their_keys(shards) == dict.fromkeys(values, OWNER)
    with sharded_session(shards) as session:
        result = session.execute(
            update(Photo).where(Photo.id == values[0]).values(owner_id=same, caption="moved")
        )
        assert result.rowcount == 1  # type: ignore[attr-defined]
        session.commit()
    assert _found_by_their_keys(shards) == {values[0]: same, values[1]: OWNER}


def test_a_core_update_through_one_engine_is_checked_by_the_guard(
    shards: dict[str, Engine],
) -> None:
    placement = _placement(shards)
    same, other = _keys(placement)
    (value,) = _store(shards)  # the session installed the guard on the engines
    home = shards[placement.database_for_key(OWNER)]
    with pytest.raises(WrongShardError), home.begin() as connection:
        connection.execute(update(Photo).where(Photo.id == value).values(owner_id=other))
    with pytest.raises(WrongShardError), home.begin() as connection:
        connection.execute(update(Photo).where(Photo.id == value), [{"owner_id": other}])
    assert _found_by_their_keys(shards) == {value: OWNER}
    with home.begin() as connection:
        connection.execute(update(Photo).where(Photo.id == value).values(owner_id=same))
    with allow_off_shard_writes(), home.begin() as connection:  # a deliberate change
        connection.execute(update(Photo).where(Photo.id == value).values(owner_id=other))
    with home.connect() as connection:
        stored = connection.execute(select(Photo.__table__.c.owner_id)).scalar_one()
    assert stored == other
