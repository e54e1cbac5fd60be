"""Writes checked at the engine: an INSERT stores only rows whose ids name that engine.

``session.execute(insert(...))`` through a sharded session is refused, but Core code can
still write through one engine (``engine.begin().execute(insert(Order), rows)``) and put
rows where no routed read will find them. ``check_writes(engines)`` hooks each engine's
``before_cursor_execute``: after the column defaults made the ids, and before the driver
runs the statement, every row's id (or parent id) must name the engine's shard, or the
INSERT raises ``WrongShardError`` and nothing is written. ``sharded_session()`` installs
it on its engines; ``uid_fields.placement.allow_off_shard_writes()`` lets a deliberate
write through.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.engine import Connection, Engine

from ..errors import WrongShardError
from ..placement import ShardMap, off_shard_writes_allowed
from .routing import Router

__all__ = ["check_writes"]


@dataclass(frozen=True)
class _Guard:
    shard: str
    router: Router


_guards: weakref.WeakKeyDictionary[Engine, _Guard] = weakref.WeakKeyDictionary()


def check_writes(engines: Mapping[str, Engine], *, shard_map: ShardMap | None = None) -> None:
    """Refuse INSERTs through these engines of rows whose ids name another shard.

    ``engines`` maps shard names to engines as a sharded session does (the same names,
    the same optional ``shard_map``). Calling it again for an engine replaces its shard.
    """
    router = Router(list(engines), shard_map)
    for name, engine in engines.items():
        if engine not in _guards:
            event.listen(engine, "before_cursor_execute", _check)
        _guards[engine] = _Guard(name, router)


def _check(
    connection: Connection,
    cursor: Any,
    statement: str,
    parameters: Any,
    context: Any,
    executemany: bool,
) -> None:
    guard = _guards.get(connection.engine)
    if guard is None or context is None or not getattr(context, "isinsert", False):
        return
    if off_shard_writes_allowed():
        return
    compiled = getattr(context, "compiled", None)
    table = getattr(getattr(compiled, "statement", None), "table", None)
    if not isinstance(table, Table):
        return
    route = guard.router.table_route(table)
    if route is None:
        return
    key = route.column.key
    for row in context.compiled_parameters or ():
        for name, value in row.items():
            if value is None or (name != key and not name.startswith(f"{key}_m")):
                continue
            expected = route.shard_of(value)
            if expected != guard.shard:
                raise WrongShardError(
                    f"an INSERT into {table.name} through {guard.shard!r} holds "
                    f"{key}={value}, which lives on {expected!r}: a row stored off its shard "
                    "cannot be found by its id (use bulk_insert(), which groups rows by "
                    "shard)",
                    database=guard.shard,
                    expected=expected,
                )
