"""A shard move's fence, as SQLAlchemy code sees it: ``ShardMoveFencedError``.

While a move switches a range, triggers on the source database refuse writes of the
range (``uid_fields.ops.fences``); the driver reports that as an error of its own kind.
A ``handle_error`` listener on the ``Engine`` class (so on every engine, a session's
shards and Core code alike, async ones through their sync engine) raises
``ShardMoveFencedError`` from it instead: from ``session.flush()``/``commit()``,
``session.execute()`` and ``connection.execute()``. Other errors pass untouched. As
after any failed flush, the session must be rolled back before it is used again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from ..sql.fences import refusal

__all__ = ["translate_fence_errors"]


def _translate(context: Any) -> None:
    fenced = refusal(context.original_exception, _database(context))
    if fenced is not None:
        raise fenced from context.sqlalchemy_exception or context.original_exception


def _database(context: Any) -> str | None:
    """The database the engine names (an engine does not know its shard name)."""
    url = getattr(context.engine, "url", None)
    return None if url is None or url.database is None else str(url.database)


def translate_fence_errors() -> None:
    """Listen on every engine (idempotent); done when ``uid_fields.sqlalchemy`` loads."""
    if not event.contains(Engine, "handle_error", _translate):
        event.listen(Engine, "handle_error", _translate)
