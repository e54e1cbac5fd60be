"""SQLAlchemy models configured from the same settings dict a Django project declares."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped

from uid_fields import ConfigurationError
from uid_fields.sqlalchemy import (
    SnowflakeField,
    UidConfig,
    lease_factory,
    lease_table,
    sharded_session,
)

UID_FIELDS = {
    "GENERATORS": {
        "orders": {
            "kind": "snowflake",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {
                "datacenter": 0,
                "worker": {"lease": "database", "database": "leases", "name": "orders"},
            },
        },
    },
    "SHARDS": {"main": {"databases": ["shard_0", "shard_1"]}},
}


def test_one_dict_gives_generators_maps_and_database_leases(tmp_path: Path) -> None:
    leases = sa.create_engine(f"sqlite:///{tmp_path / 'leases.db'}")
    metadata = sa.MetaData()
    lease_table(metadata)
    metadata.create_all(leases)
    config = UidConfig(UID_FIELDS, database_lease=lease_factory({"leases": leases}))
    generator = config.generator("orders")
    assert generator.node == {"datacenter": 0, "worker": 0}

    class Base(DeclarativeBase):
        pass

    class Order(Base):
        __tablename__ = "orders"
        id: Mapped[int] = SnowflakeField(generator=generator, primary_key=True)

    engines = {f"shard_{i}": sa.create_engine(f"sqlite:///{tmp_path}/s{i}.db") for i in range(2)}
    for engine in engines.values():
        Base.metadata.create_all(engine)
    shard_map = config.shard_map("main", "orders")
    with sharded_session(engines, shard_map=shard_map) as session:
        orders = [Order() for _ in range(20)]
        session.add_all(orders)
        session.commit()
        assert {session.shard_of(o) for o in orders} <= {"shard_0", "shard_1"}
        for order in orders:
            assert session.shard_of(order) == shard_map.database_for(order.id)
    generator._sources["worker"].release()  # type: ignore[union-attr]
    for engine in (leases, *engines.values()):
        engine.dispose()


def test_a_typo_is_a_value_error_naming_the_key() -> None:
    bad = {**UID_FIELDS, "SHARDS": {"main": {"databses": ["shard_0"]}}}
    with pytest.raises(ConfigurationError, match=r"SHARDS\.main\.databses: unknown key"):
        UidConfig(bad, database_lease=lease_factory({}))
    with pytest.raises(ValueError, match=r"GENERATORS\.orders\.fields\.worker"):
        UidConfig(UID_FIELDS)  # a database lease, and no engine to lease from
