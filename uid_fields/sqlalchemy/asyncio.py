"""The sharded session under asyncio: ``AsyncSession``s that route like ``sharded_session()``.

SQLAlchemy's asyncio extension needs ``greenlet``: install ``uid-fields[asyncio]``. This
module is imported only when used, so ``import uid_fields.sqlalchemy`` works without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from .session import ShardedIdSession

__all__ = ["async_sharded_session", "async_sharded_sessionmaker"]


def _sync_engines(shards: Mapping[str, AsyncEngine]) -> dict[str, Engine]:
    return {name: engine.sync_engine for name, engine in shards.items()}


def async_sharded_sessionmaker(
    shards: Mapping[str, AsyncEngine], **kwargs: Any
) -> async_sessionmaker[AsyncSession]:
    """``async_sessionmaker`` whose sessions route like ``sharded_session()``."""
    return async_sessionmaker(
        sync_session_class=ShardedIdSession, shards=_sync_engines(shards), **kwargs
    )


def async_sharded_session(shards: Mapping[str, AsyncEngine], **kwargs: Any) -> AsyncSession:
    """One ``AsyncSession`` over ``shards`` (name -> async engine), routed by id."""
    return AsyncSession(sync_session_class=ShardedIdSession, shards=_sync_engines(shards), **kwargs)
