"""Test models: one of each uid field, a child routed by its parent, a many-to-many."""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, Column, ForeignKey, String, Table
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from uid_fields import (
    INSTAGRAM,
    TWITTER,
    LocalityUUIDGenerator,
    PublicIds,
    ShardedIdGenerator,
    SnowflakeGenerator,
)
from uid_fields.sqlalchemy import LocalityUUIDField, ShardedBigIntField, SnowflakeField
from uid_fields.sqlalchemy.types import SnowflakeType

EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
ORDER_LAYOUT = TWITTER.replace(epoch_ms=EPOCH_MS)
PHOTO_LAYOUT = INSTAGRAM.replace(epoch_ms=EPOCH_MS)

order_ids = SnowflakeGenerator(ORDER_LAYOUT, datacenter=1, worker=2)
tag_ids = SnowflakeGenerator(ORDER_LAYOUT, datacenter=1, worker=3)
photo_ids = ShardedIdGenerator(PHOTO_LAYOUT)
event_ids = LocalityUUIDGenerator()
# Public ids: keys from the constructor (tests only; real keys come from a secret store).
PUBLIC_KEYS = {1: "sqlalchemy tests public id key 1"}
ORDER_PUBLIC_IDS = PublicIds("ord", PUBLIC_KEYS)


class Base(DeclarativeBase):
    pass


order_tags = Table(
    "order_tags",
    Base.metadata,
    Column("order_id", SnowflakeType(), ForeignKey("orders.id"), primary_key=True),
    Column("tag_id", SnowflakeType(), ForeignKey("tags.id"), primary_key=True),
)


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = SnowflakeField(
        generator=order_ids, primary_key=True, public_ids=ORDER_PUBLIC_IDS
    )
    customer: Mapped[str] = mapped_column(String(50), default="")
    items: Mapped[list[Item]] = relationship(back_populates="order", order_by="Item.line")
    tags: Mapped[list[Tag]] = relationship(secondary=order_tags)


class Item(Base):
    """No uid of its own: routed by its order (composite primary key)."""

    __tablename__ = "items"
    order_id: Mapped[int] = mapped_column(
        SnowflakeType(ORDER_LAYOUT), ForeignKey("orders.id"), primary_key=True
    )
    line: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    sku: Mapped[str] = mapped_column(String(20), default="")
    order: Mapped[Order] = relationship(back_populates="items")


class Tag(Base):
    __tablename__ = "tags"
    id: Mapped[int] = SnowflakeField(generator=tag_ids, primary_key=True)
    label: Mapped[str] = mapped_column(String(20), default="")


class Photo(Base):
    __tablename__ = "photos"
    id: Mapped[int] = ShardedBigIntField(
        generator=photo_ids,
        shard_key="owner_id",
        primary_key=True,
        public_ids=PublicIds("pho", PUBLIC_KEYS, kind="int"),
    )
    owner_id: Mapped[int] = mapped_column(BigInteger)
    caption: Mapped[str] = mapped_column(String(50), default="")


class Event(Base):
    __tablename__ = "events"
    id: Mapped[uuid.UUID] = LocalityUUIDField(
        generator=event_ids, primary_key=True, public_ids=PublicIds("evt", PUBLIC_KEYS)
    )
    name: Mapped[str] = mapped_column(String(50), default="")
