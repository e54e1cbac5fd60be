"""The application of the logical-replication move test, importable by its mover process.

Photos carry Instagram ids keyed by their owner (the route is arithmetic on the id, so a
row filter can select logical shards); comments follow their photo (routed by the
``photo_id`` column, not their key: the move sets them to ``REPLICA IDENTITY FULL``).
``Old`` is the deployment before the move (``a`` owns every logical shard), ``New``
after it (``b`` owns 6144..8191). ``python -m tests.stress.logical_move_app SOURCE_URL
TARGET_URL STATE`` runs the mover (copy, catch-up, switch) and prints its progress.
"""

from __future__ import annotations

import sys

from sqlalchemy import BigInteger, ForeignKey, String, create_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tests.sqlalchemy.models import PHOTO_LAYOUT, photo_ids, tag_ids
from uid_fields import ShardMap
from uid_fields.placement.shards import ByField
from uid_fields.sqlalchemy import ShardedBigIntField, SnowflakeField, sharded_session
from uid_fields.sqlalchemy.replication import logical_shard_move
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


def main(source_url: str, target_url: str, state: str) -> None:
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
        move.run()
    print("switched", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
