"""Writes checked at the engine: rows stored only where their ids name that engine.

``session.execute(insert(...))`` through a sharded session is refused, but Core code can
still write through one engine (``engine.begin().execute(insert(Order), rows)``) and put
rows where no routed read will find them. ``check_writes(engines)`` hooks each engine's
``before_cursor_execute``: after the column defaults made the ids, and before the driver
runs the statement, every INSERTed row's id (or parent id) must name the engine's shard
and agree with its shard key, and an UPDATE that sets an id (or parent id) must set one
naming the engine's shard (the UPDATE leaves the row where it is); otherwise the
statement raises ``WrongShardError`` and nothing is written. The rules are the core's
(``uid_fields.placement.new_objects``). ``sharded_session()`` installs it on its
engines; ``uid_fields.placement.allow_off_shard_writes()`` lets a deliberate write
through.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, event
from sqlalchemy.engine import Connection, Engine

from ..errors import WrongShardError
from ..placement import (
    ShardMap,
    check_id_change,
    check_key_change,
    id_for_new_object,
    off_shard_writes_allowed,
)
from .routing import Router, TableRoute

__all__ = ["check_writes", "checked_writes", "guard_changes", "guard_router", "keys_checked"]

#: Set while a sharded session flushes: per table, the (id, shard key) pairs of the rows
#: it placed itself just before (the core's rule, id against key).
Checked = dict[Table, set[tuple[Any, Any]]]
_keys_checked: ContextVar[Checked | None] = ContextVar("uid_fields_keys_checked", default=None)


@contextmanager
def keys_checked(rows: Checked) -> Iterator[None]:
    """INSERTs inside may hold rows whose ids were checked against their shard keys
    already: those whose (id, key) pair ``rows`` holds for their table (a sharded
    session's flush places each new row before it writes). The guard still checks that
    each row's id names its engine's shard, but does not place such a row's key a
    second time; any other row is checked in full."""
    token = _keys_checked.set(rows)
    try:
        yield
    finally:
        _keys_checked.reset(token)


@dataclass(frozen=True)
class _Guard:
    shard: str
    router: Router


_guards: weakref.WeakKeyDictionary[Engine, _Guard] = weakref.WeakKeyDictionary()
# How many times check_writes installed or replaced guards (see guard_changes).
_changes = 0
_guards_lock = threading.Lock()


def guard_changes() -> int:
    """A count that moves whenever ``check_writes`` installs or replaces a guard: a
    caller that saw its engines guarded at one count knows them guarded so while the
    count stays (a sharded session per request checks its eight engines once)."""
    return _changes


def check_writes(engines: Mapping[str, Engine], *, shard_map: ShardMap | None = None) -> None:
    """Refuse INSERTs through these engines of rows whose ids name another shard (or
    disagree with their shard keys), and UPDATEs that set ids naming another shard.

    ``engines`` maps shard names to engines as a sharded session does (the same names,
    the same optional ``shard_map``). Calling it again for an engine replaces its shard.
    """
    checked_writes(engines, shard_map=shard_map)


def checked_writes(engines: Mapping[str, Engine], *, shard_map: ShardMap | None = None) -> int:
    """``check_writes``, answering the ``guard_changes()`` count the engines are
    guarded so at (read under the same lock, so no other change slips between)."""
    global _changes
    with _guards_lock:
        names = list(engines)
        known = [_guards.get(engine) for engine in engines.values()]
        first = known[0] if known else None
        if first is not None and all(
            guard is not None
            and guard.router is first.router
            and guard.shard == name
            and first.router.shard_names == names
            and first.router.shard_map is shard_map
            for guard, name in zip(known, names, strict=True)
        ):
            return _changes  # guarded so already: a session per request builds no router
        router = Router(names, shard_map)
        for name, engine in engines.items():
            if engine not in _guards:
                event.listen(engine, "before_cursor_execute", _check)
            _guards[engine] = _Guard(name, router)
        _changes += 1
        return _changes


def guard_router(engine: Engine) -> Router | None:
    """The router ``check_writes`` checks ``engine``'s statements by (None if unguarded):
    the tables' placements a one-shard connection makes its ids by."""
    guard = _guards.get(engine)
    return None if guard is None else guard.router


def guarded(engine: Engine) -> bool:
    """Whether ``check_writes`` listens to ``engine``'s statements (for INSERTs and
    UPDATEs only, so a SELECT sent below SQLAlchemy's execution misses nothing of it)."""
    return engine in _guards


def _check(
    connection: Connection,
    cursor: Any,
    statement: str,
    parameters: Any,
    context: Any,
    executemany: bool,
) -> None:
    guard = _guards.get(connection.engine)
    if guard is None or context is None:
        return
    inserting = bool(getattr(context, "isinsert", False))
    if not inserting and not getattr(context, "isupdate", False):
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
    rows = context.compiled_parameters or ()
    if inserting:
        _check_insert(guard, route, table, rows)
    else:
        _check_update(guard, route, table, rows)


def _check_insert(guard: _Guard, route: TableRoute, table: Table, rows: Any) -> None:
    """Each row's id (or parent id) names this shard, and agrees with its shard key."""
    key = route.column.key
    config = route.config
    key_column = config.shard_key_column if not route.by_parent and config.shard_key else None
    placed = _keys_checked.get()
    checked = placed.get(table) if placed is not None else None
    for row in rows:
        for suffix, value in _values_of(row, key):
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
            shard_key = None if key_column is None else _value_at(row, key_column, suffix)
            if shard_key is not None and not _placed(checked, value, shard_key):
                id_for_new_object(  # the core's rule: refuses an id its key disagrees with
                    route.placement,
                    value,
                    shard_key,
                    keyed=True,
                    database_made=not config.client_side,
                    what=table.name,
                    key_name=key_column or "shard key",
                )


def _placed(checked: set[tuple[Any, Any]] | None, value: Any, shard_key: Any) -> bool:
    """Whether the session's flush placed this row, with this id and key, itself."""
    if not checked:
        return False
    try:
        return (value, shard_key) in checked
    except TypeError:  # an unhashable key: check it in full
        return False


def _check_update(guard: _Guard, route: TableRoute, table: Table, rows: Any) -> None:
    """An UPDATE that sets the id (or the parent id) sets one naming this shard, and one
    that sets the shard key sets one whose rows live on this shard (the core's
    ``check_id_change`` and ``check_key_change``: the UPDATE leaves the rows here).

    SQLAlchemy names the SET clause's parameter of a column after the column's key (the
    WHERE clause's get other names, and a ``bindparam()`` may not take that one), so
    the new values are found by name; a value set to an SQL expression is not seen.
    """
    key = route.column.key
    config = route.config
    key_column = config.shard_key_column if not route.by_parent and config.shard_key else None
    for row in rows:
        value = row.get(key)
        if value is not None:
            check_id_change(
                route.placement,
                value,
                guard.shard,
                what=f"{table.name} row",
                name=key,
            )
        shard_key = None if key_column is None else row.get(key_column)
        if shard_key is not None:
            check_key_change(
                route.placement,
                shard_key,
                guard.shard,
                what=f"{table.name} row",
                name=key_column or "shard key",
            )


def _values_of(row: Mapping[str, Any], column: str) -> list[tuple[str, Any]]:
    """(suffix, value) of each value ``row`` holds for ``column``: the column's key, or,
    in a multi-row VALUES, the key with ``_m<row>`` appended."""
    found = []
    for name, value in row.items():
        if value is None or not name.startswith(column):
            continue
        suffix = name[len(column) :]
        if suffix == "" or (suffix.startswith("_m") and suffix[2:].isdigit()):
            found.append((suffix, value))
    return found


def _value_at(row: Mapping[str, Any], column: str, suffix: str) -> Any:
    """The value of ``column`` in the same VALUES row as a value named with ``suffix``
    (the first row's values may be named with or without ``_m0``)."""
    if suffix in ("", "_m0"):
        value = row.get(column)
        return value if value is not None else row.get(f"{column}_m0")
    return row.get(f"{column}{suffix}")
