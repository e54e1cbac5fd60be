"""PostgreSQL makes the ids (Instagram's way); Python decodes and routes them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import BigInteger, String, create_engine, insert, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from uid_fields.placement.shards import ByField, ShardMap
from uid_fields.sqlalchemy import (
    DatabaseIds,
    ShardedBigIntField,
    ShardRoutingError,
    place_on_shard,
    sharded_session,
)

from .conftest import SHARDS, recording
from .models import PHOTO_LAYOUT

database_ids = DatabaseIds(PHOTO_LAYOUT, name="uid_sa_next_id")
SHARD_MAP = ShardMap(SHARDS, route=ByField(PHOTO_LAYOUT, "shard"))


class DbBase(DeclarativeBase):
    pass


class Post(DbBase):
    __tablename__ = "posts"
    id: Mapped[int] = ShardedBigIntField(
        database_ids=database_ids, shard_key="author_id", primary_key=True
    )
    author_id: Mapped[int | None] = mapped_column(BigInteger)
    body: Mapped[str] = mapped_column(String(50), default="")


@pytest.fixture
def pg_shards(postgres_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    database_ids.attach(DbBase.metadata, DatabaseIds.shards_of(SHARD_MAP, postgres_engines))
    for engine in postgres_engines.values():
        DbBase.metadata.drop_all(engine)
        DbBase.metadata.create_all(engine)
    yield postgres_engines
    for engine in postgres_engines.values():
        DbBase.metadata.drop_all(engine)


def test_ids_come_back_by_returning_and_route_to_their_database(
    pg_shards: dict[str, Engine],
) -> None:
    with sharded_session(pg_shards, shard_map=SHARD_MAP) as session, recording(pg_shards) as log:
        posts = [Post(author_id=author, body=str(author)) for author in range(0, 8192, 512)]
        assert all(p.id is None for p in posts)
        session.add_all(posts)
        session.commit()
        assert any("generate_series" in s for s in log.sql("SELECT"))  # ids fetched per shard
        placed = {p.id: session.shard_of(p) for p in posts}
    for post_id, shard in placed.items():
        parts = PHOTO_LAYOUT.decompose(post_id)
        assert parts.shard == SHARD_MAP.ranges[shard][0]  # the database's own logical shard
        assert SHARD_MAP.database_for(post_id) == shard
    with sharded_session(pg_shards, shard_map=SHARD_MAP) as session, recording(pg_shards) as log:
        for post_id, shard in placed.items():
            log.clear()
            post = session.get(Post, post_id)
            assert post is not None and session.shard_of(post) == shard
            assert log.engines_used() == {shard} and log.count() == 1
        # rows of one author (and of authors on the same logical shard) share a database
        same = [Post(author_id=7), Post(author_id=7), Post(author_id="7")]
        session.add_all(same)
        session.commit()
        placement = session.router.table_route(Post.__table__).placement  # type: ignore[union-attr, arg-type]
        assert {session.shard_of(p) for p in same} == {placement.database_for_key(7)}


def test_core_inserts_and_repeated_creation_keep_ids_unique(pg_shards: dict[str, Engine]) -> None:
    engine = pg_shards["shard_2"]
    with engine.begin() as connection:
        ids = (
            connection.execute(
                insert(Post.__table__).returning(Post.__table__.c.id), [{"body": "x"}] * 3000
            )
            .scalars()
            .all()
        )
        database_ids.install(connection, SHARD_MAP.ranges["shard_2"][0])  # a re-run
        more = (
            connection.execute(
                insert(Post.__table__).returning(Post.__table__.c.id), [{"body": "y"}] * 10
            )
            .scalars()
            .all()
        )
    every = ids + more
    assert len(set(every)) == len(every) == 3010  # > 1024 per ms never wraps
    assert {PHOTO_LAYOUT.decompose(i).shard for i in every} == {SHARD_MAP.ranges["shard_2"][0]}


def test_rows_without_id_or_shard_key_need_a_placement(pg_shards: dict[str, Engine]) -> None:
    with sharded_session(pg_shards, shard_map=SHARD_MAP) as session:
        loose = Post(body="nowhere")
        session.add(loose)
        with pytest.raises(ShardRoutingError, match="place_on_shard"):
            session.flush()
        session.rollback()
        pinned = Post(body="pinned")
        place_on_shard(pinned, "shard_3")
        session.add(pinned)
        session.commit()
        assert SHARD_MAP.database_for(pinned.id) == "shard_3"


def test_database_ids_need_postgres() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as connection, pytest.raises(NotImplementedError, match="PostgreSQL"):
        database_ids.install(connection, 0)
    with engine.connect() as connection:
        assert connection.execute(select(text("1"))).scalar() == 1


def test_a_flush_fetches_database_ids_in_one_statement_per_shard(
    pg_shards: dict[str, Engine],
) -> None:
    with sharded_session(pg_shards) as session, recording(pg_shards) as log:
        posts = [Post(author_id=author % 40, body=str(author)) for author in range(1000)]
        session.add_all(posts)
        session.commit()
        used = log.engines_used("INSERT")
        assert len(used) > 1
        for shard in used:
            assert log.count(shard, "INSERT") == 1, log.statements[shard]
        fetched = [q for q in log.sql("SELECT") if "generate_series" in q]
        assert len(fetched) == len(used)
        ids = [p.id for p in posts]
    assert len(set(ids)) == 1000
    with sharded_session(pg_shards) as session:
        for post_id in ids[::97]:
            assert session.get(Post, post_id) is not None  # routed back by the id


def test_a_state_ahead_of_the_clock_is_found_and_reset_when_safe(
    pg_shards: dict[str, Engine],
) -> None:
    engine = pg_shards["shard_1"]
    layout = PHOTO_LAYOUT
    with engine.begin() as connection:
        connection.execute(insert(Post.__table__).values(author_id=512))
        assert database_ids.check_state(connection, ["posts"]).ahead_ms < 1000
        # What a clock an hour ahead for a while left behind: the state runs ahead.
        connection.execute(
            text(
                "SELECT setval('uid_sa_next_id_state', "
                f"((uid_sa_next_id_clock() + 3600000 - {layout.epoch_ms}) "
                f"/ {layout.time_unit_ms}) << {layout.sequence_bits})"
            )
        )
        state = database_ids.check_state(connection, ["posts"])
        assert 3_590_000 < state.ahead_ms <= 3_600_000 and state.resettable
        assert database_ids.reset_state(connection, ["posts"]).ahead_ms == 0
        made = connection.execute(
            insert(Post.__table__).values(author_id=512).returning(Post.__table__.c.id)
        ).scalar_one()
    assert abs(layout.decompose(made).datetime.timestamp() * 1000 - _now_ms()) < 60_000


def _now_ms() -> float:
    import time

    return time.time() * 1000
