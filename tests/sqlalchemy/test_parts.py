"""``obj.<attribute>_parts``: the decoded id, for every uid column."""

from __future__ import annotations

from datetime import UTC, datetime

from uid_fields.sqlalchemy import field_config

from .models import ORDER_LAYOUT, PHOTO_LAYOUT, Event, Item, Order, Photo


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
