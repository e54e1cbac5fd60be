"""The application of the logical-replication move test, importable by its mover process.

Photos carry Instagram ids keyed by their owner (the route is arithmetic on the id, so a
row filter can select logical shards); comments follow their photo (routed by the
``photo_id`` column, not their key: the move sets them to ``REPLICA IDENTITY FULL``).
``Old`` is the deployment before the move (``a`` owns every logical shard), ``New``
after it (``b`` owns 6144..8191). ``python -m tests.stress.logical_move_app SOURCE_URL
TARGET_URL STATE [KILL_AT]`` runs the mover (copy, catch-up, switch) and prints its
progress; with ``KILL_AT`` it kills itself (SIGKILL) at that SQL statement (a number,
or a text the statement contains; see ``killing_at``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import sys
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tests.sqlalchemy.models import PHOTO_LAYOUT, photo_ids, tag_ids
from uid_fields import ShardMap
from uid_fields.ops.replication import LogicalMove, Run
from uid_fields.placement.shards import ByField
from uid_fields.sqlalchemy import (
    ShardedBigIntField,
    SnowflakeField,
    logical_shard_move,
    sharded_session,
)
from uid_fields.sqlalchemy.types import SnowflakeType

LOW, HIGH = 6144, 8192
BEFORE = {"a": (0, 8192)}
AFTER = {"a": (0, LOW), "b": (LOW, HIGH)}


def mapping(ranges: dict[str, tuple[int, int]]) -> tuple[type, type]:
    class Base(DeclarativeBase):
        pass

    photos = ShardMap(route=ByField(PHOTO_LAYOUT, "shard"), ranges=ranges)

    class Photo(Base):
        __tablename__ = "lm_photos"
        id: Mapped[int] = ShardedBigIntField(
            generator=photo_ids, shard_key="owner_id", shards=photos, primary_key=True
        )
        owner_id: Mapped[int] = mapped_column(BigInteger)
        caption: Mapped[str] = mapped_column(String(30), default="")

    class Comment(Base):
        __tablename__ = "lm_comments"
        id: Mapped[int] = SnowflakeField(generator=tag_ids, primary_key=True)
        photo_id: Mapped[int] = mapped_column(
            SnowflakeType(PHOTO_LAYOUT), ForeignKey("lm_photos.id")
        )
        text: Mapped[str] = mapped_column(String(30), default="")

    return Photo, Comment


Old, New = mapping(BEFORE), mapping(AFTER)


def sqlalchemy_url(url: str) -> str:
    return url.replace("postgresql:", "postgresql+psycopg:")


def killing_at(move: LogicalMove, spec: str) -> None:
    """SIGKILL this process at a SQL statement of the mover (either database): the
    ``N``-th (before it is sent when even, after it returned when odd), or the first
    that contains ``text`` (``text+``: after it returned)."""
    sent = itertools.count(1)
    after = spec.endswith("+")
    marker = spec.rstrip("+")

    def die(where: str) -> None:
        print(f"killed {where}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def wrap(run: Run) -> Run:
        def counted(sql: str) -> list[tuple[Any, ...]]:
            number = next(sent)
            if marker.isdigit():
                hit, late = number == int(marker), number % 2 == 1
            else:
                hit, late = marker in sql, after
            if hit and not late:
                die(f"before {sql[:50]}")
            rows = run(sql)
            if hit:
                die(f"after {sql[:50]}")
            return rows

        return counted

    move.source = dataclasses.replace(move.source, run=wrap(move.source.run))
    move.target = dataclasses.replace(move.target, run=wrap(move.target.run))


def main(source_url: str, target_url: str, state: str, kill_at: str = "") -> None:
    source, target = create_engine(source_url), create_engine(target_url)
    with (
        sharded_session({"a": source}) as session,
        logical_shard_move(
            session,
            Old,
            source="a",
            target="b",
            engines={"b": target},
            low=LOW,
            high=HIGH,
            state=state,
            poll_s=0.05,
            timeout_s=60,
            on_progress=lambda p: print(p, flush=True),
        ) as move,
    ):
        print("started", flush=True)
        if kill_at:
            killing_at(move, kill_at)
        move.run()
    print("switched", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
