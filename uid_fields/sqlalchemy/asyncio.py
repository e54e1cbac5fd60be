"""The sharded session under asyncio: ``AsyncSession``s that route like ``sharded_session()``.

SQLAlchemy's asyncio extension needs ``greenlet`` (install ``uid-fields[asyncio]``), and
importing it fails without. So it is imported when a session is made, not with this
module: ``import uid_fields.sqlalchemy`` works with the ``sqlalchemy`` extra alone.

``await on_all_shards(session, select(...))`` is the fan-out of such a session: on server
databases one task per shard on the event loop, gathered under ``fan_out_timeout``, and
merged by the same rules as ``ShardedIdSession.on_all_shards`` (which is what it runs,
in the session's greenlet; ``await session.run_sync(lambda s: s.on_all_shards(...))``
works the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine, Result

from ..errors import UnmergeableQueryError
from .session import ShardedIdSession

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

__all__ = ["async_sharded_session", "async_sharded_sessionmaker", "on_all_shards"]


def _sync_engines(shards: Mapping[str, AsyncEngine]) -> dict[str, Engine]:
    return {name: engine.sync_engine for name, engine in shards.items()}


def async_sharded_sessionmaker(
    shards: Mapping[str, AsyncEngine], **kwargs: Any
) -> async_sessionmaker[AsyncSession]:
    """``async_sessionmaker`` whose sessions route like ``sharded_session()``."""
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker  # needs greenlet

    return async_sessionmaker(
        sync_session_class=ShardedIdSession,
        class_=AsyncSession,
        shards=_sync_engines(shards),
        **kwargs,
    )


def async_sharded_session(shards: Mapping[str, AsyncEngine], **kwargs: Any) -> AsyncSession:
    """One ``AsyncSession`` over ``shards`` (name -> async engine), routed by id."""
    from sqlalchemy.ext.asyncio import AsyncSession  # needs greenlet

    return AsyncSession(sync_session_class=ShardedIdSession, shards=_sync_engines(shards), **kwargs)


if TYPE_CHECKING:
    # Typed as AsyncSession.execute (the session is the first argument), by the installed
    # SQLAlchemy, as ShardedIdSession.on_all_shards is typed as Session.execute.
    on_all_shards = AsyncSession.execute
else:

    async def on_all_shards(
        session: AsyncSession,
        statement: Any,
        params: Mapping[str, Any] | None = None,
        *,
        execution_options: Mapping[str, Any] | None = None,
        bind_arguments: Mapping[str, Any] | None = None,
    ) -> Result[Any]:
        """Run a SELECT on every shard of an async sharded session; merge the answers.

        ``ShardedIdSession.on_all_shards`` run in the session's greenlet: the same merge
        (ORDER BY, LIMIT/OFFSET, added counts), the same refusals and the same deadline;
        over async drivers each shard is read by a task of its own on the event loop.
        """
        sync = session.sync_session
        if not isinstance(sync, ShardedIdSession):
            raise TypeError(
                "on_all_shards() needs a session of async_sharded_session() or "
                "async_sharded_sessionmaker()"
            )
        options = execution_options
        asked = {**getattr(statement, "get_execution_options", dict)(), **(options or {})}
        if asked.get("yield_per") or asked.get("stream_results"):
            # A streamed result is read after this call returns, outside the session's
            # greenlet, where an async driver cannot be awaited (MissingGreenlet).
            raise UnmergeableQueryError(
                "on_all_shards() with yield_per / stream_results under asyncio: the rows "
                "would be read outside the session's greenlet, where async drivers cannot "
                "run; read the whole result (without yield_per), or page through it with "
                "keyset pages"
            )

        def run(s: ShardedIdSession) -> Result[Any]:
            return s.on_all_shards(
                statement, params, execution_options=options, bind_arguments=bind_arguments
            )

        return await session.run_sync(run)
