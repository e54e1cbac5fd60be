"""Decimal ids made by MariaDB through SQLAlchemy DDL: installed per shard, routed back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import String, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from uid_fields import DECIMAL, DecimalGenerator
from uid_fields.placement import ShardMap, route_for, stamped_logical_shard
from uid_fields.sqlalchemy import DecimalIds
from uid_fields.sqlalchemy.types import SnowflakeType

from .conftest import SHARDS

LAYOUT = DECIMAL.replace(unsigned=True)
decimal_ids = DecimalIds(LAYOUT, name="uid_sa_decimal_id")
SHARD_MAP = ShardMap(SHARDS, route=route_for(DecimalGenerator(LAYOUT)))


class DecBase(DeclarativeBase):
    pass


class Ticket(DecBase):
    __tablename__ = "tickets"
    id: Mapped[int] = mapped_column(SnowflakeType(LAYOUT), primary_key=True, autoincrement=False)
    label: Mapped[str] = mapped_column(String(20), default="")


@pytest.fixture
def maria(mariadb_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    decimal_ids.attach(DecBase.metadata, DecimalIds.shards_of(SHARD_MAP, mariadb_engines))
    for engine in mariadb_engines.values():
        DecBase.metadata.drop_all(engine)
        DecBase.metadata.create_all(engine)
    yield mariadb_engines
    for engine in mariadb_engines.values():
        DecBase.metadata.drop_all(engine)


def test_each_shard_makes_ids_that_route_back_to_it(maria: dict[str, Engine]) -> None:
    for name, engine in maria.items():
        with engine.begin() as connection:
            value = connection.exec_driver_sql("SELECT uid_sa_decimal_id()").scalar_one()
            connection.execute(insert(Ticket).values(id=value, label=name))
            stored = connection.execute(select(Ticket.id)).scalar_one()
        parts = LAYOUT.decompose(int(stored))
        assert parts.server == stamped_logical_shard(SHARD_MAP, name)
        assert SHARD_MAP.database_for(int(stored)) == name


def test_the_column_default_form(maria: dict[str, Engine]) -> None:
    engine = maria["shard_2"]
    default = decimal_ids.column_default(stamped_logical_shard(SHARD_MAP, "shard_2"))
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP TABLE IF EXISTS sa_ticket_defaults")
        connection.exec_driver_sql(
            "CREATE TABLE sa_ticket_defaults (id BIGINT UNSIGNED NOT NULL PRIMARY KEY "
            f"DEFAULT {default.text}, label VARCHAR(10))"
        )
        connection.exec_driver_sql("INSERT INTO sa_ticket_defaults (label) VALUES ('x')")
        value = connection.exec_driver_sql("SELECT id FROM sa_ticket_defaults").scalar_one()
        connection.exec_driver_sql("DROP TABLE sa_ticket_defaults")
    assert SHARD_MAP.database_for(int(value)) == "shard_2"


def test_installing_on_another_database_is_refused(sqlite_engines: dict[str, Engine]) -> None:
    with sqlite_engines["shard_0"].begin() as connection, pytest.raises(NotImplementedError):
        decimal_ids.install(connection, 0)
