"""The sharded session as the fan-out and the session's own parts read it.

``ShardedIdSession`` (``session.py``) is made of its reads (``session_reads``) and its
writes (``session_writes``), and its reads hand whole statements to the fan-out
(``fanout``). Those modules stand below ``session.py``; what they read of the session is
declared here, under all of them, so none of them imports the class above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlalchemy.ext.horizontal_shard import ShardedSession

from .routing import Router

__all__ = ["ShardedSessionBase"]


class ShardedSessionBase(ShardedSession):
    """SQLAlchemy's ``ShardedSession`` with what ``ShardedIdSession`` adds to it, as far
    as the modules below ``session.py`` read it (defined there, declared here)."""

    if TYPE_CHECKING:  # defined by ShardedIdSession (session.py)
        router: Router
        fan_out_timeout: float
        fan_out_concurrency: int | None

        @property
        def shard_names(self) -> list[str]: ...
        def get_bind(
            self,
            mapper: Any = None,
            *,
            shard_id: str | None = None,
            instance: Any = None,
            clause: Any = None,
            **kw: Any,
        ) -> Any: ...
        def holds_shard_connections(self) -> bool: ...
        def shard_engines(self) -> dict[str, Engine]: ...
