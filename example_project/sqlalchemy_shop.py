"""The shop's domain with SQLAlchemy: the same ids, the same routing, a sharded session.

Run by ``make demo`` (or ``python example_project/sqlalchemy_shop.py``): four SQLite
files by default, or four PostgreSQL databases with ``EXAMPLE_DB=postgres``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Engine, ForeignKey, String, create_engine, event, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from uid_fields import (
    INSTAGRAM,
    TWITTER,
    LocalityUUIDGenerator,
    ShardedIdGenerator,
    SnowflakeGenerator,
)
from uid_fields.sqlalchemy import (
    LocalityUUIDField,
    ShardedBigIntField,
    SnowflakeField,
    SnowflakeType,
    sharded_session,
)

EPOCH_2024 = 1704067200000
SHARDS = [f"shard_{i}" for i in range(4)]
customers_ids = SnowflakeGenerator(TWITTER.replace(epoch_ms=EPOCH_2024), datacenter=0, worker=2)
# Customer ids are snowflakes, so mix them before taking the logical shard.
order_ids = ShardedIdGenerator(INSTAGRAM.replace(epoch_ms=EPOCH_2024), key_hash="mixed")
view_ids = LocalityUUIDGenerator()


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "sa_customers"
    id: Mapped[int] = SnowflakeField(generator=customers_ids, primary_key=True)
    name: Mapped[str] = mapped_column(String(100))


class Order(Base):
    """Every order of a customer shares one shard: the customer id is the shard key."""

    __tablename__ = "sa_orders"
    id: Mapped[int] = ShardedBigIntField(
        generator=order_ids, shard_key="customer_id", primary_key=True
    )
    customer_id: Mapped[int] = mapped_column(BigInteger)
    total_cents: Mapped[int] = mapped_column(default=0)
    lines: Mapped[list[OrderLine]] = relationship(back_populates="order")


class OrderLine(Base):
    """No id of its own: lives with its order."""

    __tablename__ = "sa_order_lines"
    order_id: Mapped[int] = mapped_column(
        SnowflakeType(), ForeignKey("sa_orders.id"), primary_key=True
    )
    line: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    sku: Mapped[str] = mapped_column(String(20))
    order: Mapped[Order] = relationship(back_populates="lines")


class PageView(Base):
    __tablename__ = "sa_page_views"
    id: Mapped[uuid.UUID] = LocalityUUIDField(generator=view_ids, primary_key=True)
    path: Mapped[str] = mapped_column(String(200))


def engines() -> dict[str, Engine]:
    if os.environ.get("EXAMPLE_DB") == "postgres":
        import psycopg

        base = os.environ.get(
            "UID_FIELDS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        )
        with psycopg.connect(base, autocommit=True) as conn:
            for alias in SHARDS:
                if not conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [f"shop_sa_{alias}"]
                ).fetchone():
                    conn.execute(f'CREATE DATABASE "shop_sa_{alias}"')
        root = base.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
        return {alias: create_engine(f"{root}/shop_sa_{alias}") for alias in SHARDS}
    data = Path(os.environ.get("EXAMPLE_DATA_DIR", Path(__file__).resolve().parent / "var"))
    data.mkdir(parents=True, exist_ok=True)
    return {alias: create_engine(f"sqlite:///{data / f'sa_{alias}.sqlite3'}") for alias in SHARDS}


@contextmanager
def statements(shards: dict[str, Engine]) -> Iterator[dict[str, list[str]]]:
    """The SQL each engine runs inside the block."""
    seen: dict[str, list[str]] = {alias: [] for alias in shards}
    listeners = []
    for alias, engine in shards.items():

        def record(conn: Any, cursor: Any, statement: str, *args: Any, _alias: str = alias) -> None:
            seen[_alias].append(statement)

        event.listen(engine, "before_cursor_execute", record)
        listeners.append((engine, record))
    try:
        yield seen
    finally:
        for engine, record in listeners:
            event.remove(engine, "before_cursor_execute", record)


def main() -> None:
    shards = engines()
    for engine in shards.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    started = datetime.now(UTC) - timedelta(seconds=1)
    with sharded_session(shards) as session:
        customers = [Customer(name=f"Customer {i}") for i in range(100)]
        orders = [Order(customer_id=customers[i % 100].id, total_cents=100 * i) for i in range(500)]
        lines = [OrderLine(order=order, line=n, sku="MUG-01") for order in orders for n in range(2)]
        views = [PageView(path=f"/p/{i}") for i in range(300)]
        with statements(shards) as seen:
            session.add_all([*customers, *orders, *lines, *views])
            session.commit()
        inserts = sum(sql.startswith("INSERT") for batch in seen.values() for sql in batch)
        print(
            f"flushed {len(customers) + len(orders) + len(lines) + len(views)} objects "
            f"with {inserts} INSERT statements (batched per shard)"
        )
        print(f"{'table':<16} " + " ".join(f"{alias:>8}" for alias in SHARDS))
        for model in (Customer, Order, OrderLine, PageView):
            counts = [
                shards[alias]
                .connect()
                .execute(select(func.count()).select_from(model))
                .scalar_one()
                for alias in SHARDS
            ]
            print(f"{model.__tablename__:<16} " + " ".join(f"{n:>8}" for n in counts))
        first = customers[0]
        mine = {
            session.get(Order, o.id).id_parts.shard for o in orders if o.customer_id == first.id
        }
        print(
            f"customer {first.id}'s {sum(o.customer_id == first.id for o in orders)} orders "
            f"share logical shard(s) {sorted(mine)}"
        )
        session.expunge_all()
        target = orders[-1]
        with statements(shards) as seen:
            fetched = session.get(Order, target.id)
        used = {alias: len(sql) for alias, sql in seen.items() if sql}
        print(
            f"session.get(Order, {target.id}) -> total {fetched.total_cents}: "
            f"{sum(used.values())} SELECT on {list(used)}"
        )
        recent = session.on_all_shards(select(Order).where(Order.id.time >= started)).all()
        print(f"orders since {started:%H:%M:%S} by Order.id.time >= t: {len(recent)}")
        view = session.on_all_shards(select(PageView).limit(1)).scalars().first()
        assert view is not None
        parts = view.id_parts
        print(f"page view {view.id}: pid {parts.pid}, created {parts.datetime:%H:%M:%S}")


if __name__ == "__main__":
    main()
