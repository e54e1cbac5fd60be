"""Public ids in SQLAlchemy: ``Order.id.public == token`` compiles to the stored id, so
the sharded session sends the statement to the one engine the id names; the codec
comes from the field's constructor (``public_ids=PublicIds("ord", keys)``).
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from uid_fields import PublicIdError
from uid_fields.sqlalchemy import sharded_session

from .conftest import recording
from .models import ORDER_PUBLIC_IDS, Event, Item, Order, Photo, Tag


def _literal(statement: object) -> str:
    return str(statement.compile(compile_kwargs={"literal_binds": True}))  # type: ignore[attr-defined]


def test_the_comparator_compiles_to_the_stored_id() -> None:
    order_id = Order().id
    token = ORDER_PUBLIC_IDS.encode(order_id)
    sql = _literal(select(Order.id).where(Order.id.public == token))
    assert f"orders.id = {order_id}" in sql
    assert token not in sql
    assert f"orders.id != {order_id}" in _literal(select(Order.id).where(Order.id.public != token))
    other = Order().id
    both = _literal(
        select(Order.id).where(Order.id.public.in_([token, ORDER_PUBLIC_IDS.encode(other)]))
    )
    assert f"orders.id IN ({order_id}, {other})" in both


def test_encode_and_decode_through_the_column() -> None:
    order_id = Order().id
    token = Order.id.public_encode(order_id)
    assert token == ORDER_PUBLIC_IDS.encode(order_id) and token.startswith("ord_")
    assert Order.id.public_decode(token) == order_id
    event_id = Event().id
    event_token = Event.id.public_encode(event_id)
    assert event_token.startswith("evt_")
    assert Event.id.public_decode(event_token) == event_id
    clause = Event.id.public == event_token
    assert clause.left.compare(Event.__table__.c.id) and clause.right.value == event_id


def test_a_foreign_key_reads_its_targets_tokens() -> None:
    order_id = Order().id
    sql = _literal(
        select(Item.line).where(Item.order_id.public == Order.id.public_encode(order_id))
    )
    assert f"items.order_id = {order_id}" in sql


@pytest.mark.parametrize(
    "bad",
    ["", "ord_", "ord_" + "0" * 21, "pho_" + "0" * 21, None, 12345],
)
def test_bad_tokens_are_refused_before_any_sql(bad: object) -> None:
    with pytest.raises(PublicIdError):
        select(Order).where(Order.id.public == bad)
    with pytest.raises(PublicIdError):
        Order.id.public_decode(bad)  # type: ignore[arg-type]


def test_another_models_token_is_refused() -> None:
    photo = Photo(owner_id=7)
    token = Photo.id.public_encode(photo.id)
    assert token.startswith("pho_")
    with pytest.raises(PublicIdError):
        Order.id.public == token  # noqa: B015
    event_token = Event.id.public_encode(Event().id)
    with pytest.raises(PublicIdError):
        Order.id.public_decode(event_token)


def test_a_column_without_public_ids_says_so() -> None:
    with pytest.raises(TypeError, match="public_ids"):
        Tag.id.public  # noqa: B018


def test_the_comparator_routes_to_one_engine(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        orders = [Order(customer=f"c{i}") for i in range(12)]
        photo = Photo(owner_id=42, caption="p")
        event = Event(name="e")
        session.add_all([*orders, photo, event])
        session.commit()
        placed = {order.id: session.shard_of(order) for order in orders}
        photo_shard, event_shard = session.shard_of(photo), session.shard_of(event)
        photo_id, event_id = photo.id, event.id
    for order_id, shard in placed.items():
        token = Order.id.public_encode(order_id)
        with sharded_session(shards) as session, recording(shards) as log:
            found = session.scalars(select(Order).where(Order.id.public == token)).one()
            assert found.id == order_id
            assert log.count(kind="SELECT") == 1 and log.engines_used() == {shard}
        with sharded_session(shards) as session, recording(shards) as log:
            got = session.get(Order, Order.id.public_decode(token))
            assert got is not None and got.id == order_id
            assert log.count(kind="SELECT") == 1 and log.engines_used() == {shard}
    with sharded_session(shards) as session, recording(shards) as log:
        token = Photo.id.public_encode(photo_id)
        assert session.scalars(select(Photo).where(Photo.id.public == token)).one().id == photo_id
        assert log.engines_used() == {photo_shard}
        log.clear()
        token = Event.id.public_encode(event_id)
        assert session.scalars(select(Event).where(Event.id.public == token)).one().id == event_id
        assert log.engines_used() == {event_shard}
        assert isinstance(event_id, uuid.UUID)
