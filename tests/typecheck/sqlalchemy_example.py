"""User code of the SQLAlchemy adapter, with the types a checker must infer.

Not a test module pytest runs: ``make typecheck-docs`` runs ``mypy --strict`` and
``pyright`` over it, and each ``assert_type`` is checked by both (it also runs, as a
program: ``python -m tests.typecheck.sqlalchemy_example``).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import assert_type

from sqlalchemy import BigInteger, ForeignKey, create_engine, func, select
from sqlalchemy.engine import Result
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from uid_fields import (
    DECIMAL,
    INSTAGRAM,
    TWITTER,
    DecimalGenerator,
    DecimalParts,
    IdParts,
    LocalityParts,
    LocalityUUIDGenerator,
    ShardedIdGenerator,
    SnowflakeGenerator,
    SnowflakeParts,
)
from uid_fields.sqlalchemy import (
    LocalityUUIDField,
    ShardedBigIntField,
    ShardedIdSession,
    SnowflakeField,
    SnowflakeType,
    sharded_session,
)

EPOCH_MS = 1704067200000
orders_gen = SnowflakeGenerator(TWITTER.replace(epoch_ms=EPOCH_MS), datacenter=0, worker=1)
photos_gen = ShardedIdGenerator(INSTAGRAM.replace(epoch_ms=EPOCH_MS))


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = SnowflakeField(generator=orders_gen, primary_key=True)
    id_parts = IdParts(SnowflakeParts)
    customer: Mapped[str] = mapped_column(default="")
    items: Mapped[list[Item]] = relationship(back_populates="order")


class Item(Base):
    __tablename__ = "items"
    order_id: Mapped[int] = mapped_column(
        SnowflakeType(), ForeignKey("orders.id"), primary_key=True
    )
    line: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    order: Mapped[Order] = relationship(back_populates="items")


class Photo(Base):
    __tablename__ = "photos"
    id: Mapped[int] = ShardedBigIntField(
        generator=photos_gen, shard_key="owner_id", primary_key=True
    )
    id_parts = IdParts(SnowflakeParts)
    owner_id: Mapped[int] = mapped_column(BigInteger)


class Event(Base):
    __tablename__ = "events"
    id: Mapped[uuid.UUID] = LocalityUUIDField(generator=LocalityUUIDGenerator(), primary_key=True)
    id_parts = IdParts(LocalityParts)


class Ticket(Base):
    __tablename__ = "tickets"
    # A generator built inline, as the docs' one-line models do.
    id: Mapped[int] = SnowflakeField(
        generator=DecimalGenerator(DECIMAL, server=3), primary_key=True
    )
    id_parts = IdParts(DecimalParts)


def main() -> None:
    data = Path(tempfile.mkdtemp())
    engines = {f"shard_{i}": create_engine(f"sqlite:///{data}/s{i}.db") for i in range(2)}
    for engine in engines.values():
        Base.metadata.create_all(engine)

    order = Order(items=[Item(line=1)])
    assert_type(order.id, int)
    assert_type(order.id_parts, SnowflakeParts)
    assert_type(order.id_parts.datetime, datetime)
    assert_type(order.id_parts.worker, int)
    assert_type(Event().id_parts, LocalityParts)
    assert_type(Event().id_parts.pid, int)
    assert_type(Ticket().id_parts.server, int)
    assert_type(Order.id_parts, IdParts[SnowflakeParts])

    with sharded_session(engines) as session:
        assert_type(session, ShardedIdSession)
        session.add_all([order, Photo(owner_id=42), Event(), Ticket()])
        session.commit()

        found = session.get(Order, order.id)
        assert_type(found, Order | None)
        assert found is not None and found.id_parts.datetime <= datetime.now(UTC)
        assert_type(session.get(Event, uuid.uuid4()), Event | None)

        orders = session.on_all_shards(select(Order)).scalars().all()
        assert_type(orders, Sequence[Order])
        count = session.on_all_shards(select(func.count()).select_from(Order)).scalar()
        assert_type(count, int | None)
        # Typed as Session.execute: Result[tuple[int, str]] for select(Order.id,
        # Order.customer) on SQLAlchemy 2.0, Result[int, str] on 2.1.
        rows = session.on_all_shards(select(Order.id)).scalars().all()
        assert_type(rows, Sequence[int])
        photos = session.scalars(select(Photo).where(Photo.owner_id == 42)).all()
        assert_type(photos, Sequence[Photo])
        result = session.on_all_shards(select(Photo))
        assert isinstance(result, Result)
        assert len(orders) == 1 and count == 1 and len(rows) == 1 and len(photos) == 1


if __name__ == "__main__":
    main()
