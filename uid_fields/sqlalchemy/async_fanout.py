"""The shards' reads of a fan-out over async engines: one task per shard on the event loop.

A session over async engines (``async_sharded_session``) runs its sync code, a fan-out
included, in a greenlet that SQLAlchemy spawned on the event loop; the drivers' connections
(psycopg's ``AsyncConnection``, asyncpg) are awaited there and cannot be used from a thread
of the fan-out pools. So ``fan_out`` hands the reads here: each shard's read runs in a
greenlet of its own (``greenlet_spawn``, as ``AsyncConnection`` runs its calls) inside an
asyncio task, the tasks are gathered by ``ops.async_parallel`` under the session's
``fan_out_timeout``, and the calling greenlet waits for them (``await_only``). The merge
is the sync fan-out's: only the reading differs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy.engine import Engine, Result
from sqlalchemy.exc import DBAPIError

from .._internal import dbapi
from ..ops import async_parallel, parallel
from .compat import await_only, greenlet_spawn

__all__ = ["on_event_loop", "read_on_loop", "read_shards"]


def on_event_loop(engines: Mapping[str, Engine]) -> bool:
    """Whether these engines' drivers are async ones, whose connections live on the
    event loop (``create_async_engine``)."""
    return any(engine.dialect.is_async for engine in engines.values())


def read_on_loop(
    engines: Mapping[str, Engine],
    statement: Any,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    timeout: float | None,
) -> list[Result[Any]]:
    """``read_shards`` waited for from the greenlet a sync session runs in under asyncio
    (``AsyncSession.run_sync``, and every ``AsyncSession`` call)."""
    return await_only(read_shards(engines, statement, params, options, timeout))


async def read_shards(
    engines: Mapping[str, Engine],
    statement: Any,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    timeout: float | None,
) -> list[Result[Any]]:
    """``statement`` read on every engine at the same time, one task each, in order."""
    names = list(engines)

    def on(shard: str) -> Callable[[], Awaitable[Result[Any]]]:
        def run() -> Awaitable[Result[Any]]:
            return greenlet_spawn(_read_once_more, engines[shard], statement, params, options)

        return run

    return await async_parallel.run_per_shard(
        [on(shard) for shard in names], names=names, timeout=timeout
    )


def dropped(error: Exception) -> bool:
    """Whether a shard's read failed because its pooled connection was dropped (the
    server closed it while it sat idle): SQLAlchemy has invalidated it then."""
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def _read_once_more(
    engine: Engine, statement: Any, params: Mapping[str, Any] | None, options: dict[str, Any]
) -> Result[Any]:
    return parallel.once_more_after_drop(
        lambda: _read(engine, statement, params, options),
        dropped,
        cut=async_parallel.timed_out,
    )


def _read(
    engine: Engine, statement: Any, params: Mapping[str, Any] | None, options: dict[str, Any]
) -> Result[Any]:
    """The statement's rows on a connection of ``engine`` that the deadline can cut (its
    socket is shut down; the driver's read then fails and the connection is discarded)."""
    with engine.connect() as connection:
        driver = connection.connection.driver_connection
        async_parallel.on_timeout(lambda: dbapi.interrupt(driver))
        result = connection.execute(statement, params, execution_options=options)
        rows: Result[Any] = result.freeze()()  # read before the connection goes back
        return rows
