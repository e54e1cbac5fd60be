"""Ids exist from construction on; Core inserts get them from the column default."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import BigInteger, String, create_engine, insert, inspect, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, Session, mapped_column

from uid_fields import SnowflakeGenerator
from uid_fields.sqlalchemy import (
    LocalityUUIDField,
    ShardedBigIntField,
    ShardKeyError,
    SnowflakeField,
    allow_off_shard_writes,
    field_config,
)

from .conftest import recording
from .models import ORDER_LAYOUT, Event, Order, Photo, event_ids, photo_ids

pytestmark = pytest.mark.versions


def test_ids_are_assigned_at_construction() -> None:
    first, second = Order(), Order()
    assert isinstance(first.id, int) and second.id > first.id
    assert isinstance(Event().id, uuid.UUID)
    assert Order(id=5).id == 5  # an explicit id is kept
    assert inspect(first).transient  # no session involved


def test_sharded_id_follows_the_shard_key() -> None:
    placement = field_config(Photo.__table__.c.id).placement  # type: ignore[union-attr]
    photo = Photo(owner_id=17)
    assert photo_ids.shard_of(photo.id) == placement.logical_shard_for_key(17)
    first = photo.id
    photo.owner_id = "17"  # the same key as a digit string: the id stays
    assert photo.id == first
    photo.owner_id = 18
    assert photo_ids.shard_of(photo.id) == placement.logical_shard_for_key(18)
    assert photo.id != first
    assert Photo().id is None  # nothing to choose a shard with yet


def test_a_bad_shard_key_fails_when_set() -> None:
    with pytest.raises(ShardKeyError, match="neither a number nor a UUID"):
        Photo(owner_id="seventeen")
    with pytest.raises(ValueError, match="must be an int"):
        Photo(owner_id=1.5)


def test_a_stored_row_cannot_change_shard(sqlite_shards: dict[str, Engine]) -> None:
    engine = sqlite_shards["shard_0"]
    with Session(engine) as session:
        photo = Photo(owner_id=1)
        session.add(photo)
        session.commit()
        photo.owner_id = "1"  # the same key: allowed
        with pytest.raises(ValueError, match="cannot change shards"):
            photo.owner_id = 2


def test_core_insert_without_id_uses_the_column_default(shards: dict[str, Engine]) -> None:
    engine = shards["shard_1"]
    # One database on purpose: the column defaults are under test, not the placement.
    with allow_off_shard_writes(), engine.begin() as connection:
        connection.execute(insert(Order.__table__), [{"customer": "a"}, {"customer": "b"}])
        connection.execute(insert(Photo.__table__), [{"owner_id": 8192 * 3 + 5}])
        connection.execute(insert(Event.__table__), [{"name": "e"}])
        orders = connection.execute(select(Order.__table__.c.id)).scalars().all()
        photo = connection.execute(select(Photo.__table__.c.id)).scalar_one()
        event = connection.execute(select(Event.__table__.c.id)).scalar_one()
    assert len(set(orders)) == 2 and all(ORDER_LAYOUT.decompose(i).worker == 2 for i in orders)
    placement = field_config(Photo.__table__.c.id).placement  # type: ignore[union-attr]
    assert photo_ids.shard_of(photo) == placement.logical_shard_for_key(8192 * 3 + 5)
    assert isinstance(event, uuid.UUID)


def test_core_insert_without_shard_key_is_refused(sqlite_shards: dict[str, Engine]) -> None:
    engine = sqlite_shards["shard_0"]
    with (
        recording({"e": engine}) as log,
        engine.connect() as connection,
        pytest.raises(StatementError, match="shard key 'owner_id'"),
    ):
        connection.execute(insert(Photo.__table__), [{"caption": "x"}])
    assert log.count(kind="INSERT") == 0


def test_plain_session_flush_runs_one_insert_per_object_batch() -> None:
    engine = create_engine("sqlite://")
    Order.metadata.create_all(engine)
    with Session(engine) as session, recording({"e": engine}) as log:
        session.add_all([Order() for _ in range(10)])
        session.commit()
        assert log.count(kind="INSERT") == 1  # no UPDATE, no per-row INSERT
        assert log.count(kind="UPDATE") == 0


class DataclassBase(MappedAsDataclass, DeclarativeBase):
    pass


gen = SnowflakeGenerator(ORDER_LAYOUT, datacenter=2, worker=2)


class Invoice(DataclassBase):
    __tablename__ = "invoices"
    owner_id: Mapped[int] = mapped_column(BigInteger)
    id: Mapped[int] = SnowflakeField(generator=gen, primary_key=True, init=False)
    ref: Mapped[int | None] = ShardedBigIntField(
        generator=photo_ids, shard_key="owner_id", init=False, unique=True
    )
    token: Mapped[uuid.UUID] = LocalityUUIDField(generator=event_ids, init=False)
    note: Mapped[str] = mapped_column(String(20), default="")


def test_dataclass_mappings_get_ids_too() -> None:
    invoice = Invoice(owner_id=8192 + 3, note="x")
    assert isinstance(invoice.id, int) and isinstance(invoice.token, uuid.UUID)
    placement = field_config(Invoice.__table__.c.ref).placement  # type: ignore[attr-defined]
    assert invoice.ref is not None
    assert photo_ids.shard_of(invoice.ref) == placement.logical_shard_for_key(8192 + 3)
    assert "id=" in repr(invoice)
    engine = create_engine("sqlite://")
    DataclassBase.metadata.create_all(engine)
    with Session(engine) as session:
        session.add(invoice)
        session.commit()
        stored = session.scalars(select(Invoice)).one()
        assert stored.id_parts.worker == 2  # type: ignore[attr-defined]


def test_field_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="makes its own ids"):
        SnowflakeField(generator=gen, default=1)
    with pytest.raises(TypeError, match="exactly one"):
        ShardedBigIntField()
    with pytest.raises(TypeError, match="LocalityUUIDGenerator"):
        LocalityUUIDField(generator=gen)  # type: ignore[arg-type]
    assert field_config(Order.__table__.c.id).generator is not None  # type: ignore[union-attr]
    assert field_config(Order.__table__.c.customer) is None
