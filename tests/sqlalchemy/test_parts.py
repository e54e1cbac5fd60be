"""``obj.<attribute>_parts``: the decoded id, for every uid column."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import DeclarativeBase, Mapped

from uid_fields import IdParts, LocalityParts, SnowflakeParts
from uid_fields.sqlalchemy import LocalityUUIDField, SnowflakeField, field_config

from .models import (
    ORDER_LAYOUT,
    PHOTO_LAYOUT,
    Event,
    Item,
    Order,
    Photo,
    event_ids,
    order_ids,
)

pytestmark = pytest.mark.versions


def test_parts_decode_each_scheme() -> None:
    order = Order()
    parts = order.id_parts  # type: ignore[attr-defined]
    assert parts == ORDER_LAYOUT.decompose(order.id)
    assert (parts.datacenter, parts.worker) == (1, 2)
    assert abs((datetime.now(UTC) - parts.datetime).total_seconds()) < 5

    photo = Photo(owner_id=8192 * 2 + 9)
    placement = field_config(Photo.__table__.c.id).placement  # type: ignore[union-attr]
    assert photo.id_parts.shard == placement.logical_shard_for_key(8192 * 2 + 9)  # type: ignore[attr-defined]
    assert photo.id_parts == PHOTO_LAYOUT.decompose(photo.id)  # type: ignore[attr-defined]

    event = Event()
    assert event.id_parts.value == event.id  # type: ignore[attr-defined]
    assert event.id_parts.pid >= 0  # type: ignore[attr-defined]


def test_parts_of_foreign_keys_and_missing_ids() -> None:
    order = Order()
    item = Item(order_id=order.id, line=1)
    assert item.order_id_parts == order.id_parts  # type: ignore[attr-defined]
    assert Photo().id_parts is None  # type: ignore[attr-defined]
    assert not hasattr(Order, "customer_parts")


def test_a_declared_id_parts_is_bound_to_its_column() -> None:
    class Base(DeclarativeBase):
        pass

    class Ticket(Base):
        __tablename__ = "typed_tickets"
        id: Mapped[int] = SnowflakeField(generator=order_ids, primary_key=True)
        id_parts = IdParts(SnowflakeParts)

    class Visit(Base):
        __tablename__ = "typed_visits"
        id: Mapped[uuid.UUID] = LocalityUUIDField(generator=event_ids, primary_key=True)
        id_parts = IdParts(LocalityParts)

    ticket = Ticket()
    assert ticket.id_parts == ORDER_LAYOUT.decompose(ticket.id)
    assert isinstance(Ticket.__dict__["id_parts"], IdParts)
    assert Ticket.id_parts.decode is not None  # bound, not the class-body placeholder
    assert Visit().id_parts.pid >= 0
    ticket.id = None  # type: ignore[assignment]
    assert ticket.id_parts is None  # None exactly when the id is


def test_a_declared_id_parts_of_the_wrong_class_or_column_is_refused() -> None:
    class Base(DeclarativeBase):
        pass

    with pytest.raises(TypeError, match=r"IdParts\(LocalityParts\).*SnowflakeParts"):

        class Wrong(Base):
            __tablename__ = "typed_wrong"
            id: Mapped[int] = SnowflakeField(generator=order_ids, primary_key=True)
            id_parts = IdParts(LocalityParts)

    with pytest.raises(TypeError, match="'ref' is not a uid column"):

        class Missing(Base):
            __tablename__ = "typed_missing"
            id: Mapped[int] = SnowflakeField(generator=order_ids, primary_key=True)
            ref_parts = IdParts(SnowflakeParts)

    with pytest.raises(TypeError, match="name it <id attribute>_parts"):

        class Unnamed(Base):
            __tablename__ = "typed_unnamed"
            id: Mapped[int] = SnowflakeField(generator=order_ids, primary_key=True)
            decoded = IdParts(SnowflakeParts)
