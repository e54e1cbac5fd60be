"""``shard_move(session, tables, ...)``: a split from two databases to three, live.

Two mappings of the same tables stand for the deployment before the split (``shard_1``
owns logical shards 4096..8191) and after it (``shard_2`` owns 6144..8191). Rows are
written all along, through the session of the day.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import BigInteger, ForeignKey, String, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from uid_fields import ShardMap
from uid_fields.placement.shards import ByField, ByModulo
from uid_fields.sqlalchemy import (
    ShardedBigIntField,
    SnowflakeField,
    audit,
    shard_move,
    sharded_session,
)
from uid_fields.sqlalchemy.types import SnowflakeType

from .models import ORDER_LAYOUT, PHOTO_LAYOUT, order_ids, photo_ids, tag_ids

BEFORE = {"shard_0": (0, 4096), "shard_1": (4096, 8192)}
AFTER = {"shard_0": (0, 4096), "shard_1": (4096, 6144), "shard_2": (6144, 8192)}


def mapping(ranges: dict[str, tuple[int, int]]) -> tuple[type, type, type]:
    """Photos (Instagram ids, keyed by owner), their comments (routed by the photo) and
    events (snowflakes, mixed modulo over the same 8192 logical shards)."""

    class Base(DeclarativeBase):
        pass

    photos = ShardMap(route=ByField(PHOTO_LAYOUT, "shard"), ranges=ranges)
    events = ShardMap(route=ByModulo(8192, max_value=ORDER_LAYOUT.max_value), ranges=ranges)

    class Photo(Base):
        __tablename__ = "mv_photos"
        id: Mapped[int] = ShardedBigIntField(
            generator=photo_ids, shard_key="owner_id", shards=photos, primary_key=True
        )
        owner_id: Mapped[int] = mapped_column(BigInteger)
        caption: Mapped[str] = mapped_column(String(30), default="")

    class Comment(Base):
        __tablename__ = "mv_comments"
        id: Mapped[int] = SnowflakeField(generator=tag_ids, primary_key=True)
        photo_id: Mapped[int] = mapped_column(
            SnowflakeType(PHOTO_LAYOUT), ForeignKey("mv_photos.id")
        )
        text: Mapped[str] = mapped_column(String(30), default="")

    class Event(Base):
        __tablename__ = "mv_events"
        id: Mapped[int] = SnowflakeField(generator=order_ids, shards=events, primary_key=True)
        name: Mapped[str] = mapped_column(String(30), default="")

    return Photo, Comment, Event


Old, New = mapping(BEFORE), mapping(AFTER)


@pytest.fixture(params=["sqlite", "postgresql"])
def engines(request: pytest.FixtureRequest) -> Iterator[dict[str, Engine]]:
    every: dict[str, Engine] = request.getfixturevalue(
        "postgres_engines" if request.param == "postgresql" else "sqlite_engines"
    )
    three = {name: every[name] for name in ("shard_0", "shard_1", "shard_2")}
    metadata = Old[0].metadata
    for engine in three.values():
        metadata.drop_all(engine)
        metadata.create_all(engine)
    yield three
    for engine in three.values():
        metadata.drop_all(engine)


def write(engines: dict[str, Engine], models: tuple[type, type, type], n: int, tag: str) -> None:
    Photo, Comment, Event = models
    with sharded_session(engines) as session:
        for i in range(n):
            photo = Photo(owner_id=i * 7919, caption=f"{tag}{i}")
            session.add(photo)
            session.flush()
            session.add(Comment(photo_id=photo.id, text=f"{tag}{i}"))
            session.add(Event(name=f"{tag}{i}"))
        session.commit()


def rows(engines: dict[str, Engine], models: tuple[type, ...]) -> dict[str, dict[Any, Any]]:
    """Every row by id, over every database; an id on two databases fails."""
    found: dict[str, dict[Any, Any]] = {}
    for model in models:
        table = model.__table__  # type: ignore[attr-defined]
        seen: dict[Any, Any] = {}
        for engine in engines.values():
            with engine.connect() as connection:
                for row in connection.execute(select(table)):
                    assert row[0] not in seen, f"{table.name} {row[0]} twice"
                    seen[row[0]] = tuple(row)
        found[table.name] = seen
    return found


def test_a_split_from_two_databases_to_three_with_writes_going_on(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    old_shards = {k: engines[k] for k in BEFORE}
    write(old_shards, Old, 60, "a")
    stop, errors = threading.Event(), []

    def keep_writing() -> None:
        try:
            round_ = 0
            while not stop.is_set():
                write(old_shards, Old, 3, f"w{round_}-")
                round_ += 1
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    state = tmp_path / "split.json"
    try:
        with sharded_session(old_shards) as session:
            move = shard_move(
                session,
                Old,
                source="shard_1",
                target="shard_2",
                engines={"shard_2": engines["shard_2"]},
                low=6144,
                high=8192,
                batch=25,
                state=state,
            )
            labels = [t.store.label for t in move.tables]
            assert labels.index("mv_photos") < labels.index("mv_comments")  # parents first
            copied = move.copy()
            assert {r.phase for r in copied} == {"copy", "catch-up"}
            assert sum(r.inserted for r in copied) > 0
            move.verify()
    finally:
        stop.set()
        writer.join(60)
    assert not errors
    with sharded_session(old_shards) as session:  # writes stopped here; the fence does it too
        _copied, checked = move.switch()
        assert all(check.ok for check in checked)
    before = rows(old_shards, Old)

    with sharded_session(engines) as session:  # the new map is deployed
        again = shard_move(
            session,
            New,
            source="shard_1",
            target="shard_2",
            low=6144,
            high=8192,
            batch=25,
            state=state,
        )
        assert again.deployed
        assert again.copy() == []  # nothing is copied after the switch
        assert all(check.ok for check in again.verify())
        cleaned = again.cleanup()
        assert sum(r.deleted for r in cleaned) > 0 and not any(r.kept for r in cleaned)
        for model in New:
            assert sum(r.misplaced for r in audit(session, model)) == 0
        after = rows(engines, New)
        assert after == before  # nothing lost, nothing doubled
        Photo = New[0]
        for photo_id in list(after["mv_photos"])[:50]:
            assert session.get(Photo, photo_id) is not None
        on_new = session.execute(
            select(func.count()).select_from(Photo), bind_arguments={"shard_id": "shard_2"}
        ).scalar_one()
        assert on_new > 0
    write(engines, New, 10, "new")  # new rows of those logical shards go to shard_2


def test_a_range_the_source_does_not_own_is_refused(engines: dict[str, Engine]) -> None:
    with sharded_session({k: engines[k] for k in BEFORE}) as session:
        move = functools.partial(shard_move, session, Old, target="shard_2", low=6144, high=8192)
        with pytest.raises(ValueError, match="a move needs them all on 'shard_0'"):
            move(source="shard_0", engines=engines)
        with pytest.raises(ValueError, match="no engine for 'shard_2'"):
            move(source="shard_1")
        with pytest.raises(ValueError, match="deploy the new map"):
            move(source="shard_1", engines=engines).cleanup()


def test_rows_changed_or_deleted_on_the_source_after_the_copy_are_mirrored(
    engines: dict[str, Engine],
) -> None:
    """Before the switch the target's copy is made equal to the source: changed rows are
    updated (one executemany per batch, not a statement per row), deleted rows deleted."""
    from sqlalchemy import event

    old_shards = {k: engines[k] for k in BEFORE}
    write(old_shards, Old, 40, "a")
    Event = Old[2]
    with sharded_session(old_shards) as session:
        move = shard_move(
            session, [Event], source="shard_1", target="shard_2",
            engines={"shard_2": engines["shard_2"]}, low=6144, high=8192,
        )  # fmt: skip
        move.copy()
        moved = list(rows({"shard_2": engines["shard_2"]}, (Event,))["mv_events"])
        assert len(moved) >= 3
        table = Event.__table__  # type: ignore[attr-defined]
        with engines["shard_1"].begin() as connection:
            connection.execute(
                table.update().where(table.c.id.in_(moved[:2])).values(name="changed")
            )
            connection.execute(table.delete().where(table.c.id == moved[2]))
        updates: list[bool] = []

        def seen(
            conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
        ) -> None:
            if statement.lstrip().upper().startswith("UPDATE"):
                updates.append(many)

        event.listen(engines["shard_2"], "before_cursor_execute", seen)
        try:
            caught = move.copy()
        finally:
            event.remove(engines["shard_2"], "before_cursor_execute", seen)
        assert sum(r.updated for r in caught) == 2 and sum(r.deleted for r in caught) == 1
        assert updates == [True]  # both rows in one executemany
        assert all(check.ok for check in move.verify())
    target = rows({"shard_2": engines["shard_2"]}, (Event,))["mv_events"]
    assert moved[2] not in target
    assert {target[i][1] for i in moved[:2]} == {"changed"}
