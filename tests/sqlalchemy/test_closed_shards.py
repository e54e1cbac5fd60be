"""Closed databases through the session: new keys avoid them, old rows stay usable.

Closing is part of the map a field is declared with (ids are made when objects are
built). Two mappings of one table stand for the deployment before and after
``shard_0`` was closed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import BigInteger, String, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from uid_fields import ShardMap
from uid_fields.placement import ByField, route_for
from uid_fields.sqlalchemy import ShardedBigIntField, SnowflakeField, sharded_session

from .conftest import SHARDS
from .models import PHOTO_LAYOUT, order_ids, photo_ids

OPEN = ShardMap(SHARDS, route=ByField(PHOTO_LAYOUT, "shard"))
CLOSED = ShardMap(SHARDS, route=ByField(PHOTO_LAYOUT, "shard"), closed=["shard_0"])


def picture_model(shard_map: ShardMap) -> type:
    class Base(DeclarativeBase):
        pass

    class Picture(Base):
        __tablename__ = "pictures"
        id: Mapped[int] = ShardedBigIntField(
            generator=photo_ids, shard_key="owner_id", shards=shard_map, primary_key=True
        )
        owner_id: Mapped[int] = mapped_column(BigInteger)
        caption: Mapped[str] = mapped_column(String(20))

    return Picture


Before, After = picture_model(OPEN), picture_model(CLOSED)


@pytest.fixture
def engines(sqlite_shards: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    for engine in sqlite_shards.values():
        Before.metadata.create_all(engine)
    yield sqlite_shards
    for engine in sqlite_shards.values():
        Before.metadata.drop_all(engine)


def test_new_rows_of_a_key_on_a_closed_database_go_elsewhere(
    engines: dict[str, Engine],
) -> None:
    with sharded_session(engines) as session:
        pictures = [Before(owner_id=owner, caption="before") for owner in range(40)]
        session.add_all(pictures)
        session.commit()
        before = {p.owner_id: session.shard_of(p) for p in pictures}
    on_closed = [owner for owner, shard in before.items() if shard == "shard_0"]
    assert on_closed

    with sharded_session(engines) as session:
        new = [After(owner_id=owner, caption="after") for owner in range(40)]
        session.add_all(new)
        session.commit()
        assert "shard_0" not in {session.shard_of(p) for p in new}
        for owner in on_closed:  # the old row (on shard_0) and the new one, one query
            found = session.scalars(select(After).where(After.owner_id == owner)).all()
            assert sorted(p.caption for p in found) == ["after", "before"]
        found = session.scalars(select(After).where(After.owner_id == on_closed[0])).all()
        kept = next(p for p in found if p.caption == "before")
        kept.caption = "edited"  # rows on a closed database stay writable
        session.commit()
        assert session.shard_of(kept) == "shard_0"
        kept_id = kept.id
    with sharded_session(engines) as session:
        assert session.get(After, kept_id).caption == "edited"


def test_rows_without_a_key_skip_closed_databases(engines: dict[str, Engine]) -> None:
    closed = ShardMap(SHARDS, route=route_for(order_ids), closed=["shard_1", "shard_2"])

    class Base(DeclarativeBase):
        pass

    class Ticket(Base):
        __tablename__ = "tickets"
        id: Mapped[int] = SnowflakeField(generator=order_ids, shards=closed, primary_key=True)

    for engine in engines.values():
        Base.metadata.create_all(engine)
    with sharded_session(engines) as session:
        tickets = [Ticket() for _ in range(200)]
        session.add_all(tickets)
        session.commit()
        assert {session.shard_of(t) for t in tickets} == {"shard_0", "shard_3"}
    for engine in engines.values():
        Base.metadata.drop_all(engine)
