"""Fan-out under asyncio: ``on_all_shards`` on async engines (psycopg async, aiosqlite).

On server databases the shards are read at the same time on the event loop (one task
per shard, gathered), never on the thread pool of the sync fan-out (an async driver's
connection cannot be used from another thread: SQLAlchemy raises ``MissingGreenlet``).
The same merge rules apply, and the same deadline: a frozen shard gives
``FanOutTimeoutError`` naming it. Both spellings are covered: the issue's
``await s.run_sync(lambda ss: ss.on_all_shards(...))`` and the awaitable
``await on_all_shards(s, ...)``.

Needs greenlet (the ``asyncio`` extra); ``make test-sqlalchemy-only`` leaves this module out.
asyncpg is not among the project's test dependencies: psycopg 3 is the async PostgreSQL
driver covered here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from tests.tcp_proxy import freezable_proxy
from uid_fields.errors import FanOutTimeoutError, UnmergeableQueryError
from uid_fields.sqlalchemy import bulk_insert
from uid_fields.sqlalchemy.asyncio import async_sharded_session, on_all_shards
from uid_fields.sqlalchemy.compat import await_only, greenlet_spawn

from .conftest import SHARDS, postgres_url
from .models import Base, Order

pytestmark = pytest.mark.versions

COUNT = select(func.count()).select_from(Order)


@asynccontextmanager
async def shard_tables(engines: dict[str, AsyncEngine]) -> AsyncIterator[None]:
    for engine in engines.values():
        async with engine.begin() as connection:
            await connection.run_sync(Base.metadata.drop_all)
            await connection.run_sync(Base.metadata.create_all)
    try:
        yield
    finally:
        for engine in engines.values():
            async with engine.begin() as connection:
                await connection.run_sync(Base.metadata.drop_all)
            await engine.dispose()


async def _fill(engines: dict[str, AsyncEngine], count: int) -> list[int]:
    async with async_sharded_session(engines) as session:
        rows = [{"customer": f"c{i % 7}"} for i in range(count)]
        ids: list[int] = await session.run_sync(lambda s: bulk_insert(s, Order, rows))
        await session.commit()
    return ids


def _postgres_engines(databases: list[str], driver: str = "psycopg") -> dict[str, AsyncEngine]:
    # postgresql+psycopg through create_async_engine is psycopg 3's async connections;
    # postgresql+asyncpg is asyncpg's.
    return {
        name: create_async_engine(
            make_url(postgres_url(database)).set(drivername=f"postgresql+{driver}")
        )
        for name, database in zip(SHARDS, databases, strict=True)
    }


def _record_threads(engines: dict[str, AsyncEngine], seen: list[int]) -> None:
    def before(*args: Any) -> None:
        seen.append(threading.get_ident())

    for engine in engines.values():
        event.listen(engine.sync_engine, "before_cursor_execute", before)


async def _answers(session: AsyncSession, ids: list[int]) -> None:
    """Counts, aggregates and ordered column rows over every shard, in both spellings."""
    # The spelling, unchanged: the sync fan-out inside run_sync.
    total = await session.run_sync(lambda ss: ss.on_all_shards(COUNT).scalar())  # type: ignore[attr-defined]
    assert total == len(ids)
    # The awaitable spelling.
    assert (await on_all_shards(session, COUNT)).scalar() == len(ids)
    low, high, added = (
        await on_all_shards(
            session, select(func.min(Order.id), func.max(Order.id), func.sum(Order.id))
        )
    ).one()
    assert (low, high, added) == (min(ids), max(ids), sum(ids))
    newest = (
        (
            await on_all_shards(
                session, select(Order.id).order_by(Order.id.desc()).limit(5).offset(2)
            )
        )
        .scalars()
        .all()
    )
    assert list(newest) == sorted(ids, reverse=True)[2:7]
    by_customer = (
        await on_all_shards(
            session, select(Order.customer, Order.id).order_by(Order.customer, Order.id.desc())
        )
    ).all()
    assert [tuple(r) for r in by_customer] == sorted(
        ((f"c{i % 7}", n) for i, n in enumerate(ids)), key=lambda r: (r[0], -r[1])
    )
    objects = (await on_all_shards(session, select(Order).order_by(Order.id).limit(3))).scalars()
    assert [o.id for o in objects] == sorted(ids)[:3]
    # Groups that span shards merge, on the event loop too.
    groups = await on_all_shards(
        session,
        select(Order.customer, func.count(), func.avg(Order.id))
        .group_by(Order.customer)
        .order_by(Order.customer),
    )
    expected = {}
    for i, n in enumerate(ids):
        expected.setdefault(f"c{i % 7}", []).append(n)
    assert [(c, k) for c, k, _ in groups.all()] == [
        (c, len(v)) for c, v in sorted(expected.items())
    ]
    with pytest.raises(UnmergeableQueryError, match="window"):
        await on_all_shards(session, select(Order.id, func.row_number().over(order_by=Order.id)))


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
def test_fan_out_on_async_postgresql_drivers_runs_on_the_event_loop(
    postgres_databases: list[str], driver: str
) -> None:
    seen: list[int] = []
    engines = _postgres_engines(postgres_databases, driver)

    async def main() -> None:
        async with shard_tables(engines):
            ids = await _fill(engines, 60)
            _record_threads(engines, seen)
            async with async_sharded_session(engines) as session:
                seen.clear()
                await _answers(session, ids)
            # Every statement was sent from the event loop's thread: no pool thread
            # touched an async driver's connection.
            assert seen and set(seen) == {threading.get_ident()}

    asyncio.run(main())


def test_fan_out_on_aiosqlite(tmp_path: Path) -> None:
    engines = {
        name: create_async_engine(f"sqlite+aiosqlite:///{tmp_path / name}.db") for name in SHARDS
    }

    async def main() -> None:
        async with shard_tables(engines):
            ids = await _fill(engines, 30)
            async with async_sharded_session(engines) as session:
                await _answers(session, ids)

    asyncio.run(main())


def test_a_frozen_async_shard_is_named_within_the_deadline(postgres_databases: list[str]) -> None:
    engines = _postgres_engines(postgres_databases)
    target = make_url(engines["shard_3"].url.render_as_string(hide_password=False))

    async def main() -> None:
        async with shard_tables(engines):
            await _fill(engines, 40)
            with freezable_proxy(target.port or 5432) as proxy:
                proxied = create_async_engine(target.set(host="127.0.0.1", port=proxy.port))
                shards = {**engines, "shard_3": proxied}
                try:
                    async with async_sharded_session(shards, fan_out_timeout=1.5) as session:
                        assert (await on_all_shards(session, COUNT)).scalar() == 40
                    proxy.freeze()
                    for spelling in ("awaitable", "run_sync"):
                        async with async_sharded_session(shards, fan_out_timeout=1.5) as session:
                            with pytest.raises(FanOutTimeoutError, match="shard_3") as raised:
                                if spelling == "awaitable":
                                    await on_all_shards(session, COUNT)
                                else:
                                    await session.run_sync(
                                        lambda ss: ss.on_all_shards(COUNT).scalar()  # type: ignore[attr-defined]
                                    )
                        assert raised.value.shards == ["shard_3"]
                    # The other shards answer at once meanwhile.
                    healthy = {n: e for n, e in shards.items() if n != "shard_3"}
                    async with async_sharded_session(healthy, fan_out_timeout=1.5) as session:
                        assert 0 < (await on_all_shards(session, COUNT)).scalar() < 40
                    proxy.thaw()
                    async with async_sharded_session(shards, fan_out_timeout=5) as session:
                        assert (await on_all_shards(session, COUNT)).scalar() == 40
                finally:
                    proxy.thaw()
                    await proxied.dispose()

    asyncio.run(main())


def test_the_greenlet_bridge_runs_sync_code_that_awaits() -> None:
    """What the fan-out stands on (compat): sync code in a greenlet waits for a coroutine."""

    async def twice(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    def sync_code(n: int) -> int:
        return await_only(twice(n)) + 1

    assert asyncio.run(greenlet_spawn(sync_code, 20)) == 41


def test_an_object_fan_out_on_a_frozen_async_shard_keeps_its_deadline(
    postgres_databases: list[str],
) -> None:
    engines = _postgres_engines(postgres_databases)
    target = make_url(engines["shard_3"].url.render_as_string(hide_password=False))
    page = select(Order).order_by(Order.id.desc()).limit(10)

    async def main() -> None:
        async with shard_tables(engines):
            ids = await _fill(engines, 40)
            with freezable_proxy(target.port or 5432) as proxy:
                proxied = create_async_engine(target.set(host="127.0.0.1", port=proxy.port))
                shards = {**engines, "shard_3": proxied}
                try:
                    async with async_sharded_session(shards, fan_out_timeout=1.5) as session:
                        found = (await on_all_shards(session, page)).scalars().all()
                        assert [o.id for o in found] == sorted(ids, reverse=True)[:10]
                    proxy.freeze()
                    async with async_sharded_session(shards, fan_out_timeout=1.5) as session:
                        with pytest.raises(FanOutTimeoutError, match="shard_3") as raised:
                            await on_all_shards(session, page)
                    assert raised.value.shards == ["shard_3"]
                finally:
                    proxy.thaw()
                    await proxied.dispose()

    asyncio.run(main())


def test_async_streaming_is_refused_before_it_starts(postgres_databases: list[str]) -> None:
    engines = _postgres_engines(postgres_databases)
    streamed = select(Order).order_by(Order.id).execution_options(yield_per=10)

    async def main() -> None:
        async with shard_tables(engines):
            await _fill(engines, 12)
            async with async_sharded_session(engines) as session:
                with pytest.raises(UnmergeableQueryError, match="yield_per"):
                    await on_all_shards(session, streamed)
                with pytest.raises(UnmergeableQueryError, match="yield_per"):
                    await on_all_shards(
                        session, select(Order.id), execution_options={"stream_results": True}
                    )
                assert (await on_all_shards(session, COUNT)).scalar() == 12  # still usable

    asyncio.run(main())
