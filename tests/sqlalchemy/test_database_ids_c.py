"""``DatabaseIds(layout, language="c")``: the C next_id on shards that preload it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import BigInteger, create_engine, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tests.postgres_servers import c_library, create_extension, postgres_cluster
from uid_fields.placement.shards import ByField, ShardMap
from uid_fields.sqlalchemy import DatabaseIds, ShardedBigIntField, sharded_session

from .models import PHOTO_LAYOUT

database_ids = DatabaseIds(PHOTO_LAYOUT, name="uid_c_next_id", language="c")
NAMES = ["shard_0", "shard_1"]
SHARD_MAP = ShardMap(NAMES, route=ByField(PHOTO_LAYOUT, "shard"))


class Base(DeclarativeBase):
    pass


class Photo(Base):
    __tablename__ = "c_photos"
    id: Mapped[int] = ShardedBigIntField(
        database_ids=database_ids, shard_key="owner_id", primary_key=True
    )
    owner_id: Mapped[int] = mapped_column(BigInteger)


@pytest.fixture(scope="module")
def engines() -> Iterator[dict[str, Engine]]:
    with postgres_cluster(*c_library()) as cluster:
        create_extension(cluster.database_url("template1"))
        made = {
            name: create_engine(
                cluster.create_database(f"uidf_{name}").replace(
                    "postgresql:", "postgresql+psycopg:"
                )
            )
            for name in NAMES
        }
        database_ids.attach(Base.metadata, DatabaseIds.shards_of(SHARD_MAP, made))
        for engine in made.values():
            Base.metadata.create_all(engine)
        yield made
        for engine in made.values():
            engine.dispose()


def test_the_orm_and_core_get_ids_from_the_c_function(engines: dict[str, Engine]) -> None:
    with sharded_session(engines, shard_map=SHARD_MAP) as session:
        photos = [Photo(owner_id=owner) for owner in range(0, 8192, 64)]
        session.add_all(photos)
        session.commit()
        placed = {p.id: session.shard_of(p) for p in photos}
    assert len(placed) == len(photos)
    for photo_id, shard in placed.items():
        assert PHOTO_LAYOUT.decompose(photo_id).shard == SHARD_MAP.ranges[shard][0]
        assert SHARD_MAP.database_for(photo_id) == shard
    with engines["shard_1"].begin() as connection:
        made = connection.execute(
            insert(Photo.__table__).returning(Photo.__table__.c.id),  # type: ignore[arg-type]
            [{"owner_id": n} for n in range(5000)],
        ).scalars()
        core_ids = list(made)
        stored = connection.execute(select(Photo.__table__.c.id)).scalars().all()  # type: ignore[attr-defined]
    assert len(set(core_ids)) == 5000 and set(core_ids) <= set(stored)
    assert {SHARD_MAP.database_for(i) for i in core_ids} == {"shard_1"}
    with engines["shard_0"].connect() as connection:
        state = database_ids.check_state(connection, ["c_photos"])
    assert state.ahead_ms <= 1000  # the ceiling stays within check-db's tolerance
