"""``session.get()`` of a follower: a table whose own uid ids name no shard (it lives
with its parent through a foreign key), so its primary key alone is looked up on every
shard, as docs/sqlalchemy.md promises ("asks every shard, since the item's id names
none"): one SELECT per shard, the one row found or None, and a row on two shards is a
placement error that is raised rather than one of them picked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import ForeignKey, Integer, String, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import LegacyAPIWarning, MultipleResultsFound
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, joinedload, mapped_column, relationship

from uid_fields import TWITTER, SnowflakeGenerator
from uid_fields.sqlalchemy import (
    ShardRoutingError,
    SnowflakeField,
    allow_off_shard_writes,
    sharded_session,
)
from uid_fields.sqlalchemy.asyncio import async_sharded_session
from uid_fields.sqlalchemy.types import SnowflakeType

from .conftest import SHARDS, postgres_url, recording

pytestmark = pytest.mark.versions

EPOCH_MS = 1_704_067_200_000
post_ids = SnowflakeGenerator(TWITTER.replace(epoch_ms=EPOCH_MS), datacenter=3, worker=1)
comment_ids = SnowflakeGenerator(TWITTER.replace(epoch_ms=EPOCH_MS), datacenter=3, worker=2)


class Base(DeclarativeBase):
    pass


class Post(Base):
    __tablename__ = "fg_posts"
    id: Mapped[int] = SnowflakeField(generator=post_ids, primary_key=True)
    title: Mapped[str] = mapped_column(String(40), default="")
    comments: Mapped[list[Comment]] = relationship(back_populates="post", order_by="Comment.id")


class Comment(Base):
    """A follower: a snowflake id of its own, no map of its own, lives with its post."""

    __tablename__ = "fg_comments"
    id: Mapped[int] = SnowflakeField(generator=comment_ids, primary_key=True)
    post_id: Mapped[int] = mapped_column(SnowflakeType(), ForeignKey("fg_posts.id"))
    body: Mapped[str] = mapped_column(String(40), default="")
    post: Mapped[Post] = relationship(back_populates="comments")


class Reply(Base):
    """Lives with its post too, but its primary key is a plain integer: not a uid id,
    so the same key may well be on every shard; get() by it stays refused."""

    __tablename__ = "fg_replies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    post_id: Mapped[int] = mapped_column(SnowflakeType(), ForeignKey("fg_posts.id"))


@pytest.fixture(params=["sqlite", "postgresql"])
def engines(request: pytest.FixtureRequest) -> Iterator[dict[str, Engine]]:
    made: dict[str, Engine] = request.getfixturevalue(
        {"sqlite": "sqlite_engines", "postgresql": "postgres_engines"}[request.param]
    )
    for engine in made.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    yield made
    for engine in made.values():
        Base.metadata.drop_all(engine)


def _comments_on_every_shard(engines: dict[str, Engine]) -> dict[str, int]:
    """One comment id per shard (under posts spread until every shard has one)."""
    with sharded_session(engines) as session:
        posts = [Post(title=str(i), comments=[Comment(body=f"on {i}")]) for i in range(40)]
        session.add_all(posts)
        session.commit()
        found: dict[str, int] = {}
        for post in posts:
            found.setdefault(session.shard_of(post), post.comments[0].id)
    assert set(found) == set(SHARDS)
    return found


def test_get_of_a_follower_asks_every_shard_once(engines: dict[str, Engine]) -> None:
    placed = _comments_on_every_shard(engines)
    for shard, comment_id in placed.items():
        with sharded_session(engines) as session, recording(engines) as log:
            comment = session.get(Comment, comment_id)
            assert comment is not None and comment.id == comment_id
            assert session.shard_of(comment) == shard  # where its post lives
            assert log.count(kind="SELECT") == len(SHARDS)
            assert {name: log.count(name, "SELECT") for name in SHARDS} == dict.fromkeys(SHARDS, 1)
            log.clear()
            assert session.get(Comment, comment_id) is comment  # identity map: no SQL
            assert session.get(Comment, str(comment_id)) is comment  # text: the core's rule
            assert log.count() == 0
            # the object knows its shard: its relations and refreshes go there alone
            assert comment.post.comments == [comment]
            session.expire(comment)
            assert comment.body.startswith("on ")
            assert log.engines_used() == {shard}


def test_get_of_a_missing_follower_finds_none_after_asking_every_shard(
    engines: dict[str, Engine],
) -> None:
    with sharded_session(engines) as session, recording(engines) as log:
        assert session.get(Comment, Comment().id) is None
        assert log.engines_used(kind="SELECT") == set(SHARDS)
        assert log.count(kind="SELECT") == len(SHARDS)


def test_get_of_a_follower_with_options_and_for_update(engines: dict[str, Engine]) -> None:
    placed = _comments_on_every_shard(engines)
    with sharded_session(engines) as session:
        comment = session.get(Comment, placed["shard_2"], populate_existing=True)
        assert comment is not None and session.shard_of(comment) == "shard_2"
        session.expunge_all()
        locked = session.get(Comment, placed["shard_1"], with_for_update=True)
        assert locked is not None and session.shard_of(locked) == "shard_1"
        assert session.get(Comment, placed["shard_3"], identity_token="shard_3") is not None
        assert session.get(Comment, placed["shard_3"], identity_token="shard_0") is None
        session.expunge_all()
        with recording(engines) as log:
            joined = session.get(Comment, placed["shard_0"], options=[joinedload(Comment.post)])
            assert joined is not None and log.count(kind="SELECT") == len(SHARDS)
            assert joined.post.id == joined.post_id  # the post came with it: no SQL
            assert log.count(kind="SELECT") == len(SHARDS)


def test_a_follower_row_on_two_shards_is_a_placement_error(engines: dict[str, Engine]) -> None:
    placed = _comments_on_every_shard(engines)
    comment_id = placed["shard_0"]
    with engines["shard_0"].connect() as connection:
        row = connection.execute(select(Comment.__table__).where(Comment.id == comment_id)).one()
    with allow_off_shard_writes(), engines["shard_3"].begin() as connection:
        # a copy where no routed write would put it (a botched move, a manual fix)
        connection.execute(insert(Post.__table__).values(id=row.post_id, title="copy"))
        connection.execute(insert(Comment.__table__).values(**row._asdict()))
    with sharded_session(engines) as session:
        with pytest.raises(MultipleResultsFound, match=r"shard_0 and shard_3"):
            session.get(Comment, comment_id)
        assert list(session.identity_map.values()) == []  # neither row was picked


def test_legacy_query_get_of_a_follower_asks_every_shard(engines: dict[str, Engine]) -> None:
    """``session.query(Comment).get(id)`` (what Flask-SQLAlchemy's ``get_or_404`` of
    ``Model.query`` calls) is the session's ``get()``, options and locks included."""
    placed = _comments_on_every_shard(engines)
    for shard, comment_id in placed.items():
        with sharded_session(engines) as session, recording(engines) as log:
            with pytest.warns(LegacyAPIWarning):
                comment = session.query(Comment).get(comment_id)
            assert comment is not None and session.shard_of(comment) == shard
            assert log.count(kind="SELECT") == len(SHARDS)
            with pytest.warns(LegacyAPIWarning):
                again = session.query(Comment).populate_existing().get(str(comment_id))
            assert again is comment and log.engines_used() == set(SHARDS)
    with sharded_session(engines) as session, pytest.warns(LegacyAPIWarning):
        query = session.query(Comment).options(joinedload(Comment.post))
        locked = query.with_for_update(of=Comment).get(placed["shard_1"])
        assert locked is not None and session.shard_of(locked) == "shard_1"
        assert locked.post.id == locked.post_id
        session.expunge_all()
        assert session.query(Comment).set_shard("shard_0").get(placed["shard_1"]) is None
        assert session.query(Comment).get(Comment().id) is None


def test_get_of_a_follower_with_a_plain_primary_key_stays_refused(
    engines: dict[str, Engine],
) -> None:
    with sharded_session(engines) as session, recording(engines) as log:
        with pytest.raises(ShardRoutingError):
            session.get(Reply, 1)
        assert log.count() == 0


async def _get_through_asyncio(engines: dict[str, AsyncEngine]) -> None:
    for engine in engines.values():
        async with engine.begin() as connection:
            await connection.run_sync(Base.metadata.drop_all)
            await connection.run_sync(Base.metadata.create_all)
    try:
        async with async_sharded_session(engines, expire_on_commit=False) as session:
            posts = [Post(comments=[Comment(body=str(i))]) for i in range(12)]
            session.add_all(posts)
            await session.commit()
            wanted = {p.comments[0].id: session.sync_session.shard_of(p) for p in posts}  # type: ignore[attr-defined]
        async with async_sharded_session(engines) as session:
            for comment_id, shard in wanted.items():
                comment = await session.get(Comment, comment_id)
                assert comment is not None and comment.id == comment_id
                assert session.sync_session.shard_of(comment) == shard  # type: ignore[attr-defined]
            assert await session.get(Comment, Comment().id) is None
    finally:
        for engine in engines.values():
            async with engine.begin() as connection:
                await connection.run_sync(Base.metadata.drop_all)
            await engine.dispose()


def test_get_of_a_follower_through_asyncio_on_aiosqlite(tmp_path: Path) -> None:
    engines = {
        name: create_async_engine(f"sqlite+aiosqlite:///{tmp_path / name}.db") for name in SHARDS
    }
    asyncio.run(_get_through_asyncio(engines))


def test_get_of_a_follower_through_asyncio_on_postgres(postgres_databases: list[str]) -> None:
    engines = {
        name: create_async_engine(postgres_url(database, "psycopg_async"))
        for name, database in zip(SHARDS, postgres_databases, strict=True)
    }
    asyncio.run(_get_through_asyncio(engines))
