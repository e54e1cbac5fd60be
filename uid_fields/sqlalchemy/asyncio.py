"""The sharded session under asyncio: ``AsyncSession``s that route like ``sharded_session()``.

SQLAlchemy's asyncio extension needs ``greenlet`` (install ``uid-fields[asyncio]``), and
importing it fails without. So it is imported when a session is made, not with this
module: ``import uid_fields.sqlalchemy`` works with the ``sqlalchemy`` extra alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from .session import ShardedIdSession

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

__all__ = ["async_sharded_session", "async_sharded_sessionmaker"]


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
