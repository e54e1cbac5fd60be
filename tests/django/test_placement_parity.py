"""One settings dict, two ORMs, the same databases for the same ids.

Django reads ``settings.UID_FIELDS``; SQLAlchemy builds its generators and shard maps
from the very same dict (``UidConfig``). Rows are made through Django, then the same ids
(and shard keys) are written through a SQLAlchemy sharded session: every row must land
on the database Django chose, and co-located children on their parent's database. Runs
on SQLite shards, and on PostgreSQL shards in the ``UID_FIELDS_TEST_DB=postgres`` pass.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import models
from sqlalchemy import BigInteger, ForeignKey, String, Uuid, create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from tests.django.testapp.models import (
    Customer,
    Device,
    Order,
    OrderLine,
    Photo,
    Purchase,
    Snap,
)
from tests.services import database_name, postgres_connection
from uid_fields.config import UidConfig
from uid_fields.sqlalchemy import (
    ShardedBigIntField,
    SnowflakeField,
    bulk_insert,
    sharded_session,
)
from uid_fields.sqlalchemy.types import SnowflakeType

pytestmark = pytest.mark.django_db(databases="__all__")

CONFIG = UidConfig(settings.UID_FIELDS)
SHARDS = list(settings.SHARDS)


def _ids(generator: str) -> dict[str, Any]:
    return {
        "generator": CONFIG.generator(generator),
        "shards": CONFIG.shard_map("main", generator),
    }


class Base(DeclarativeBase):
    pass


class SaCustomer(Base):
    __tablename__ = "parity_customer"
    id: Mapped[int] = SnowflakeField(primary_key=True, **_ids("default"))


class SaPurchase(Base):
    __tablename__ = "parity_purchase"
    id: Mapped[int] = ShardedBigIntField(
        primary_key=True, shard_key="customer_id", **_ids("photos")
    )
    customer_id: Mapped[int] = mapped_column(SnowflakeType(), ForeignKey("parity_customer.id"))


class SaOrder(Base):
    __tablename__ = "parity_order"
    id: Mapped[int] = SnowflakeField(primary_key=True, **_ids("default"))
    lines: Mapped[list[SaOrderLine]] = relationship()


class SaOrderLine(Base):
    __tablename__ = "parity_order_line"
    # Its own uid id, without a map of its own: the order decides where it lives.
    id: Mapped[int] = SnowflakeField(primary_key=True, generator=CONFIG.generator("default"))
    order_id: Mapped[int] = mapped_column(SnowflakeType(), ForeignKey("parity_order.id"))
    sku: Mapped[str] = mapped_column(String(20), default="")


class SaPhoto(Base):
    __tablename__ = "parity_photo"
    id: Mapped[int] = ShardedBigIntField(primary_key=True, shard_key="owner_id", **_ids("photos"))
    owner_id: Mapped[int] = mapped_column(BigInteger)


class SaDevice(Base):
    __tablename__ = "parity_device"
    id: Mapped[int] = ShardedBigIntField(
        primary_key=True, shard_key="device_uuid", **_ids("photos")
    )
    device_uuid: Mapped[uuid.UUID] = mapped_column(Uuid)


class SaSnap(Base):
    __tablename__ = "parity_snap"
    id: Mapped[int] = ShardedBigIntField(primary_key=True, **_ids("photos"))


PARITY_DATABASES = [database_name("uidf_parity", i) for i in range(len(SHARDS))]


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Engine]]:
    """SQLAlchemy's shards: the same server as Django's (PostgreSQL or SQLite files)."""
    if settings.BACKEND == "postgres":
        with postgres_connection() as admin:
            for name in PARITY_DATABASES:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                admin.execute(f"CREATE DATABASE {name}")
        base = settings.DATABASES["shard_0"]
        made = {
            alias: create_engine(
                f"postgresql+psycopg://{base['USER']}@{base['HOST']}:{base['PORT']}/"
                f"{PARITY_DATABASES[i]}"
            )
            for i, alias in enumerate(SHARDS)
        }
    else:
        folder: Path = tmp_path_factory.mktemp("parity")
        made = {alias: create_engine(f"sqlite:///{folder / alias}.db") for alias in SHARDS}
    for engine in made.values():
        Base.metadata.create_all(engine)
    yield made
    for engine in made.values():
        engine.dispose()
    if settings.BACKEND == "postgres":
        with postgres_connection() as admin:
            for name in PARITY_DATABASES:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _django_home(model: type[models.Model], pk: Any) -> str:
    """The one database that physically holds a Django row."""
    found = [a for a in SHARDS if model._default_manager.using(a).filter(pk=pk).exists()]
    assert len(found) == 1, (model, pk, found)
    return found[0]


def _sa_home(engines: dict[str, Engine], table: str, pk: Any) -> str:
    found = []
    for alias, engine in engines.items():
        with engine.connect() as connection:
            row = connection.execute(text(f"SELECT 1 FROM {table} WHERE id = :id"), {"id": pk})
            if row.first() is not None:
                found.append(alias)
    assert len(found) == 1, (table, pk, found)
    return found[0]


def _parent_keyed(engines: dict[str, Engine]) -> None:
    customers = [Customer.objects.create(name=f"c{i}") for i in range(12)]
    purchases = [Purchase.objects.create(customer=c) for c in customers for _ in range(4)]
    for purchase in purchases:
        assert _django_home(Purchase, purchase.pk) == purchase.customer._state.db
    with sharded_session(engines) as session:
        session.add_all(SaCustomer(id=c.pk) for c in customers)
        sa = [SaPurchase(id=p.pk, customer_id=p.customer_id) for p in purchases]
        session.add_all(sa)
        session.commit()
        assert [p.id for p in sa] == [p.pk for p in purchases]  # the core kept every id
    for purchase in purchases:
        home = _sa_home(engines, "parity_purchase", purchase.pk)
        assert home == _django_home(Purchase, purchase.pk)
        assert home == _sa_home(engines, "parity_customer", purchase.customer_id)


def _own_id_child(engines: dict[str, Engine]) -> None:
    orders = [Order.objects.create(note=str(i)) for i in range(8)]
    lines = [
        OrderLine.objects.create(order=order, sku=f"{n}") if n % 2 else _saved_line(order, n)
        for order in orders
        for n in range(6)
    ]
    for line in lines:
        assert _django_home(OrderLine, line.pk) == line.order._state.db
    for order in orders:
        assert order.lines.count() == 6  # type: ignore[attr-defined]
    with sharded_session(engines) as session:
        session.add_all(SaOrder(id=o.pk) for o in orders)
        session.add_all(SaOrderLine(id=x.pk, order_id=x.order_id, sku=x.sku) for x in lines)
        session.commit()
    with sharded_session(engines) as session:
        for order in orders:
            loaded = session.get(SaOrder, order.pk)
            assert loaded is not None and len(loaded.lines) == 6
    for line in lines:
        assert _sa_home(engines, "parity_order_line", line.pk) == line.order._state.db


def _saved_line(order: Order, n: int) -> OrderLine:
    line = OrderLine(order=order, sku=f"{n}")
    line.save()  # routed by the router's instance hint, not by a related manager
    return line


def _keyed_rows(
    engines: dict[str, Engine],
    model: type[models.Model],
    sa_model: type[Base],
    key: str,
    keys: list[Any],
    spread_checked: bool,
) -> None:
    made = model._default_manager.bulk_create([model(**{key: k}) for k in keys])
    django_home = {obj.pk: obj._state.db for obj in made}
    per_db = Counter(django_home.values())
    if spread_checked:
        even = len(keys) / len(SHARDS)
        assert set(per_db) == set(SHARDS)
        assert all(abs(n - even) <= 0.1 * even for n in per_db.values()), per_db
    sample = made[:: max(1, len(made) // 50)]
    for obj in sample:
        assert _django_home(model, obj.pk) == django_home[obj.pk]
    with sharded_session(engines) as session:
        bulk_insert(session, sa_model, [{"id": o.pk, key: getattr(o, key)} for o in made])
        session.commit()
        route = session.router.table_route(sa_model.__table__)  # type: ignore[arg-type]
        assert route is not None
        assert {pk: route.shard_of(pk) for pk in django_home} == django_home
    counts: Counter[str] = Counter()
    for alias, engine in engines.items():
        with engine.connect() as connection:
            table = sa_model.__tablename__
            counts[alias] = connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    assert counts == per_db
    for obj in sample:
        assert _sa_home(engines, sa_model.__tablename__, obj.pk) == django_home[obj.pk]


def _integer_keys(engines: dict[str, Engine]) -> None:
    _keyed_rows(engines, Photo, SaPhoto, "owner_id", list(range(1, 10_001)), True)


def _uuid_keys(engines: dict[str, Engine]) -> None:
    keys = [uuid.uuid4() for _ in range(50) for _ in range(4)]
    _keyed_rows(engines, Device, SaDevice, "device_uuid", keys, False)
    homes: dict[uuid.UUID, set[str]] = {}
    for device in Device.objects.on_all_shards():
        homes.setdefault(device.device_uuid, set()).add(device._state.db)  # type: ignore[arg-type]
    assert all(len(h) == 1 for h in homes.values())


def _keyless(engines: dict[str, Engine]) -> None:
    snaps = [Snap.objects.create(label=str(i)) for i in range(200)]
    assert Counter(s._state.db for s in snaps) == dict.fromkeys(SHARDS, 50)
    with sharded_session(engines) as session:
        session.add_all(SaSnap(id=s.pk) for s in snaps)
        session.commit()
    for snap in snaps[::10]:
        assert _sa_home(engines, "parity_snap", snap.pk) == _django_home(Snap, snap.pk)
    with sharded_session(engines) as session:
        fresh = [SaSnap() for _ in range(200)]  # the SQLAlchemy side's own keyless choice
        session.add_all(fresh)
        session.flush()
        assert Counter(session.shard_of(s) for s in fresh) == dict.fromkeys(SHARDS, 50)
        session.rollback()


CASES: dict[str, Callable[[dict[str, Engine]], None]] = {
    "sharded parent, foreign-key shard key": _parent_keyed,
    "child with its own uid id under a sharded parent": _own_id_child,
    "integer shard keys 1..10000": _integer_keys,
    "UUID shard keys": _uuid_keys,
    "keyless": _keyless,
}


@pytest.mark.parametrize("case", list(CASES))
def test_both_orms_put_the_same_ids_on_the_same_databases(
    case: str, engines: dict[str, Engine]
) -> None:
    for engine in engines.values():
        with engine.begin() as connection:
            for table in reversed(Base.metadata.sorted_tables):
                connection.execute(table.delete())
    CASES[case](engines)


def test_one_error_vocabulary_for_both_orms() -> None:
    import uid_fields
    import uid_fields.django
    import uid_fields.sqlalchemy
    from uid_fields import errors

    assert uid_fields.django.ShardRoutingError is errors.ShardRoutingError
    assert uid_fields.sqlalchemy.ShardRoutingError is errors.ShardRoutingError
    assert uid_fields.sqlalchemy.ShardKeyError is errors.ShardKeyError is uid_fields.ShardKeyError
    with pytest.deprecated_call():
        assert errors.UnroutableQueryError is errors.ShardRoutingError
    assert issubclass(errors.ShardRoutingError, LookupError)
    assert issubclass(errors.ShardKeyError, ValueError)
    assert issubclass(errors.WrongShardError, ValueError)
    assert issubclass(errors.ConfigurationError, ValueError)
