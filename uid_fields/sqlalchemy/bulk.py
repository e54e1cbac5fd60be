"""``bulk_insert``: Core INSERTs grouped by shard, one executemany per shard.

ShardedSession refuses ORM bulk inserts (it cannot route a list of rows), and a flush
costs ~20 µs per object. This helper fills missing ids in batches (one generator lock
per batch), checks ids given with a shard key against it (the core's rule for new
objects), groups the rows by the shard their id names, and runs one INSERT per shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from typing import Any

from sqlalchemy import Table, insert, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError

from ..errors import ShardRoutingError
from ..placement import ids_for_new_objects
from ..placement.shards import ShardMap
from .routing import Router, TableRoute
from .session import ShardedIdSession
from .twophase import check_postgresql, commit_two_phase

__all__ = ["bulk_insert"]

Target = ShardedIdSession | Mapping[str, Engine | Connection]


def _table_of(entity: Any) -> Table:
    if isinstance(entity, Table):
        return entity
    table = inspect(entity).local_table
    if not isinstance(table, Table):
        raise TypeError(f"{entity!r} is not mapped to a table")
    return table


def _fill_ids(route: TableRoute, rows: list[dict[str, Any]]) -> None:
    """Ids for the rows without one, and every row's id checked against its shard key,
    by the core's rule for new objects (a row whose id disagrees with its key is
    refused before anything is written)."""
    key, config = route.column.key, route.config
    key_column = config.shard_key_column if config.shard_key is not None else None
    given = [row.get(key) for row in rows]
    if key_column is None and None not in given:
        return  # ids to keep, and no key for them to disagree with
    if None in given and not config.client_side:
        raise ShardRoutingError(
            f"{route.table.name}.{key} is made by the database; bulk_insert needs the ids"
        )
    chosen = ids_for_new_objects(
        route.placement,
        given,
        None if key_column is None else [row.get(key_column) for row in rows],
        keyed=key_column is not None,
        database_made=not config.client_side,
        what=route.table.name,
        key_name=key_column or "shard key",
    )
    for row, decided in zip(rows, chosen, strict=True):
        if decided.made:
            row[key] = decided.value


def bulk_insert(
    target: Target,
    entity: Any,
    rows: Iterable[Mapping[str, Any]],
    *,
    shard_map: ShardMap | None = None,
    two_phase: bool = False,
) -> list[Any]:
    """Insert ``rows`` (dicts keyed by column key) on their shards; returns their ids.

    ``target`` is a sharded session (the rows join its transaction and commit with it)
    or a mapping of shard name to engine or connection. With engines, every shard's
    insert runs in its own transaction and all of them commit only once every shard
    succeeded, one after another; ``two_phase=True`` (PostgreSQL) commits them by
    two-phase commit instead, so a crash between two commits cannot leave some shards
    committed and the rest not. With connections the caller owns the transactions.
    Rows without an id get one; rows of a table routed by its parent need the parent's
    id.
    """
    table = _table_of(entity)
    if two_phase and not _engines_only(target):
        raise ArgumentError(
            "two_phase=True needs a mapping of shard name to engine: a session commits "
            "with its own two_phase setting (sharded_session(..., two_phase=True)), and "
            "connections' transactions belong to the caller"
        )
    if two_phase:
        check_postgresql(target)  # type: ignore[arg-type]  # engines, checked above
    if isinstance(target, ShardedIdSession):
        router = target.router
    else:
        router = Router(list(target), shard_map)
    route = router.table_route(table)
    if route is None:
        raise ShardRoutingError(f"table {table.name} has no uid field to route rows by")
    batch = [dict(row) for row in rows]
    if not route.by_parent:
        _fill_ids(route, batch)
    key = route.column.key
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in batch:
        if row.get(key) is None:
            raise ShardRoutingError(f"a row of {table.name} has no {key} to route it by")
        groups.setdefault(route.shard_of(row[key]), []).append(row)
    statement = insert(table)
    order = sorted(groups, key=router.order)
    if isinstance(target, ShardedIdSession):
        for shard in order:
            target.connection(bind_arguments={"shard_id": shard}).execute(statement, groups[shard])
    elif _engines_only(target):
        engines = {s: e for s in order if isinstance(e := target[s], Engine)}
        with ExitStack() as stack:  # an error anywhere rolls every shard back
            opened: dict[str, Connection] = {}
            for shard, engine in engines.items():
                opened[shard] = stack.enter_context(engine.connect())
                opened[shard].execute(statement, groups[shard])
            if two_phase and len(opened) > 1:
                commit_two_phase(opened, engines)
            else:
                for connection in opened.values():
                    connection.commit()
    else:  # connections (the caller's transactions), or engines mixed with them
        for shard in order:
            bind = target[shard]
            if isinstance(bind, Engine):
                with bind.begin() as connection:
                    connection.execute(statement, groups[shard])
            else:
                bind.execute(statement, groups[shard])
    if not route.by_parent:
        return [row[key] for row in batch]
    primary = list(table.primary_key.columns)
    return [row.get(primary[0].key) if len(primary) == 1 else None for row in batch]


def _engines_only(target: Target) -> bool:
    return not isinstance(target, ShardedIdSession) and all(
        isinstance(bind, Engine) for bind in target.values()
    )
