"""The sharded session under asyncio: aiosqlite files and psycopg async databases.

Needs greenlet (the ``asyncio`` extra); ``make test-sqlalchemy-only`` leaves this module out.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import selectinload

import uid_fields.sqlalchemy
from uid_fields.sqlalchemy import bulk_insert
from uid_fields.sqlalchemy.asyncio import async_sharded_session, async_sharded_sessionmaker

from .conftest import SHARDS, postgres_url, recording
from .models import Base, Item, Order
from .test_sharding_examples import CONTINENTS, SHARD_MAP, cities, weather_models
from .test_sharding_examples import SHARDS as CONTINENT_SHARDS

pytestmark = pytest.mark.versions


async def _exercise(engines: dict[str, AsyncEngine]) -> None:
    for engine in engines.values():
        async with engine.begin() as connection:
            await connection.run_sync(Base.metadata.drop_all)
            await connection.run_sync(Base.metadata.create_all)
    sync = {name: engine.sync_engine for name, engine in engines.items()}
    make_session = async_sharded_sessionmaker(engines, expire_on_commit=False)
    with recording(sync) as log:
        async with make_session() as session:
            orders = [Order(customer=str(i), items=[Item(line=1)]) for i in range(200)]
            session.add_all(orders)
            await session.commit()
            assert log.count(kind="INSERT") <= 2 * 2 * len(SHARDS)  # orders + items
            shard_of = {o.id: session.sync_session.shard_of(o) for o in orders}  # type: ignore[attr-defined]
        assert set(shard_of.values()) == set(SHARDS)

        async with make_session() as session:
            for order_id, shard in list(shard_of.items())[:8]:
                log.clear()
                order = await session.get(Order, order_id, options=[selectinload(Order.items)])
                assert order is not None and [i.line for i in order.items] == [1]
                assert log.engines_used() == {shard}

            log.clear()
            everyone = await session.run_sync(lambda s: s.on_all_shards(select(Order)).all())
            assert len(everyone) == 200 and log.engines_used() == set(SHARDS)
            newest = await session.run_sync(
                lambda s: (
                    s.on_all_shards(select(Order).order_by(Order.id.desc()).limit(5))
                    .scalars()
                    .all()
                )
            )  # docs/async.md: merged over every shard, in the statement's order
            assert [o.id for o in newest] == sorted(shard_of, reverse=True)[:5]

            ids = await session.run_sync(lambda s: bulk_insert(s, Order, [{} for _ in range(40)]))
            await session.commit()
            found = (await session.scalars(select(Order).where(Order.id.in_(ids)))).all()
            assert len(found) == 40
    for engine in engines.values():
        async with engine.begin() as connection:
            await connection.run_sync(Base.metadata.drop_all)
        await engine.dispose()


def test_async_sessions_on_aiosqlite(tmp_path: Path) -> None:
    engines = {
        name: create_async_engine(f"sqlite+aiosqlite:///{tmp_path / name}.db") for name in SHARDS
    }
    asyncio.run(_exercise(engines))


def test_async_sessions_on_postgres(postgres_databases: list[str]) -> None:
    engines = {
        name: create_async_engine(postgres_url(database))
        for name, database in zip(SHARDS, postgres_databases, strict=True)
    }
    asyncio.run(_exercise(engines))


def test_async_sessionmaker_needs_shards() -> None:
    with pytest.raises(ValueError, match="at least one shard"):
        async_sharded_sessionmaker({})()


def test_the_package_names_the_async_helpers_lazily() -> None:
    from uid_fields.sqlalchemy import async_sharded_session as session_from_package

    assert session_from_package is async_sharded_session
    assert uid_fields.sqlalchemy.async_sharded_sessionmaker is async_sharded_sessionmaker
    with pytest.raises(AttributeError, match="no_such_name"):
        uid_fields.sqlalchemy.no_such_name  # noqa: B018


def test_importing_the_package_leaves_asyncio_alone() -> None:
    # Plain sessions must work without greenlet, which SQLAlchemy's asyncio extension
    # needs: the package (its async helpers included) does not import that extension
    # until an async session is made. (SQLAlchemy 2.0 itself loads greenlet when it is
    # installed; `make test-sqlalchemy-only` imports the package where it is not.)
    code = (
        "import sys, uid_fields.sqlalchemy; "
        "print(sorted(m for m in sys.modules if m.startswith('sqlalchemy.ext.asyncio')))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_sqlalchemys_weather_example_with_asyncio(tmp_path: Path) -> None:
    """SQLAlchemy's asyncio sharding example (see test_sharding_examples.py)."""
    base, WeatherLocation, Report = weather_models()
    engines = {
        s: create_async_engine(f"sqlite+aiosqlite:///{tmp_path / s}.db")
        for s in CONTINENT_SHARDS.values()
    }

    async def main() -> None:
        for engine in engines.values():
            async with engine.begin() as conn:
                await conn.run_sync(base.metadata.create_all)
        tokyo, newyork, toronto, london, dublin, brasilia, quito = cities(WeatherLocation)
        tokyo.reports.append(Report(80.0))
        newyork.reports.append(Report(75))
        quito.reports.append(Report(85))
        async with async_sharded_session(
            engines, shard_map=SHARD_MAP, expire_on_commit=False
        ) as sess:
            sess.add_all([tokyo, newyork, toronto, london, dublin, brasilia, quito])
            await sess.commit()
            t = await sess.get(WeatherLocation, tokyo.id)
            assert t is not None and t.city == "Tokyo"
            await sess.refresh(t, ["reports"])  # the lazy load, routed to Tokyo's shard
            reports = t.reports
            assert [r.temperature for r in reports] == [80.0]
            north_america = CONTINENTS.logical_shard("North America")
            result = await sess.execute(
                select(WeatherLocation).filter(WeatherLocation.region == north_america)
            )
            assert {c.city for c in result.scalars()} == {"New York", "Toronto"}
            assert sa_inspect(reports[0]).identity_token == "asia"
        for engine in engines.values():
            await engine.dispose()

    asyncio.run(main())
