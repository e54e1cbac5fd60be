"""Column types: DDL per dialect, plain value types, validation before SQL, cache keys."""

from __future__ import annotations

import uuid
import warnings

import pytest
from sqlalchemy import Table, create_engine, insert, select
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError
from sqlalchemy.schema import CreateTable

from uid_fields import DECIMAL
from uid_fields.sqlalchemy import LocalityUUIDType, SnowflakeType, allow_off_shard_writes

from .conftest import recording
from .models import ORDER_LAYOUT, Event, Order, Photo

pytestmark = pytest.mark.versions


class MySnowflake(SnowflakeType):
    pass


class MyUUID(LocalityUUIDType):
    pass


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        (postgresql.dialect(), ["id BIGINT", "id UUID"]),
        (sqlite.dialect(), ["id BIGINT", "id CHAR(32)"]),
        (mysql.dialect(), ["id BIGINT", "id CHAR(32)"]),
    ],
)
def test_ddl_per_dialect(dialect: object, expected: list[str]) -> None:
    orders = str(CreateTable(Order.__table__).compile(dialect=dialect))  # type: ignore[arg-type]
    events = str(CreateTable(Event.__table__).compile(dialect=dialect))  # type: ignore[arg-type]
    assert expected[0] in orders and expected[1] in events


def test_unsigned_layouts_are_unsigned_on_mysql() -> None:
    unsigned = SnowflakeType(DECIMAL.replace(unsigned=True))
    assert unsigned.unsigned and repr(unsigned) == "SnowflakeType(unsigned=True)"
    rendered = unsigned.dialect_impl(mysql.dialect()).compile(dialect=mysql.dialect())
    assert rendered == "BIGINT UNSIGNED"
    assert (
        SnowflakeType().dialect_impl(mysql.dialect()).compile(dialect=mysql.dialect()) == "BIGINT"
    )


def test_cache_ok_holds_for_subclasses_without_a_warning() -> None:
    assert MySnowflake.__dict__["cache_ok"] is True and MyUUID.__dict__["cache_ok"] is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        key = MySnowflake(ORDER_LAYOUT)._static_cache_key
        MyUUID()._static_cache_key  # noqa: B018
    assert key == MySnowflake(ORDER_LAYOUT)._static_cache_key
    assert key != MySnowflake(ORDER_LAYOUT.replace(epoch_ms=0))._static_cache_key


def test_values_are_plain_int_and_stdlib_uuid(shards: dict[str, Engine]) -> None:
    engine = next(iter(shards.values()))
    order, event, photo = Order(), Event(), Photo(owner_id=5)
    with allow_off_shard_writes(), engine.begin() as connection:  # one database on purpose
        connection.execute(insert(Order.__table__), [{"id": order.id}])
        connection.execute(insert(Event.__table__), [{"id": str(event.id)}])  # str accepted
        connection.execute(insert(Photo.__table__), [{"id": photo.id, "owner_id": 5}])
        got_order = connection.execute(select(Order.__table__.c.id)).scalar_one()
        got_event = connection.execute(select(Event.__table__.c.id)).scalar_one()
        got_photo = connection.execute(select(Photo.__table__.c.id)).scalar_one()
    assert type(got_order) is int and got_order == order.id
    assert type(got_photo) is int and got_photo == photo.id
    assert type(got_event) is uuid.UUID and got_event == event.id


@pytest.mark.parametrize(
    ("table", "value", "message"),
    [
        (Order.__table__, 2**63, "out of range"),
        (Order.__table__, -1, "out of range"),
        (Order.__table__, "12ab", "not an id"),
        (Order.__table__, True, "bool"),
        (Order.__table__, 1.5, "expected an int"),
        (Event.__table__, "not-a-uuid", "is not a UUID"),
        (Event.__table__, "0123", "is not a UUID"),
        (Event.__table__, 42, "expected a uuid.UUID"),
    ],
)
def test_bad_ids_fail_before_any_sql(
    sqlite_shards: dict[str, Engine], table: Table, value: object, message: str
) -> None:
    engine = sqlite_shards["shard_0"]
    with recording({"e": engine}) as log, engine.connect() as connection:
        with pytest.raises(StatementError, match=message) as raised:
            connection.execute(insert(table), [{"id": value}])
        assert isinstance(raised.value.orig, (ValueError, TypeError))
        with pytest.raises(StatementError, match=message):
            connection.execute(select(table).where(table.c.id == value))
    assert log.count() == 0


def test_digit_strings_bind_as_ints() -> None:
    engine = create_engine("sqlite://")
    Order.__table__.create(engine)  # type: ignore[attr-defined]
    with engine.begin() as connection:
        connection.execute(insert(Order.__table__), [{"id": "123456789"}])
        assert connection.execute(select(Order.__table__.c.id)).scalar_one() == 123456789
