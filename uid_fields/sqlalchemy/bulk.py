"""``bulk_insert``: Core INSERTs grouped by shard, one executemany per shard.

ShardedSession refuses ORM bulk inserts (it cannot route a list of rows), and a flush
costs ~20 µs per object. This helper fills missing ids in batches (one generator lock
per batch), groups the rows by the shard their id names, and runs one INSERT per shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Table, insert, inspect
from sqlalchemy.engine import Connection, Engine

from ..shards import ShardMap
from .errors import ShardKeyError, ShardRoutingError
from .routing import Router, TableRoute
from .session import ShardedIdSession

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
    key, config = route.column.key, route.config
    missing = [row for row in rows if row.get(key) is None]
    if not missing:
        return
    if not config.client_side:
        raise ShardRoutingError(
            f"{route.table.name}.{key} is made by the database; bulk_insert needs the ids"
        )
    keys: list[Any] | None = None
    if config.shard_key_column is not None:
        keys = [row.get(config.shard_key_column) for row in missing]
        if any(k is None for k in keys):
            raise ShardKeyError(
                f"row without {key} needs its shard key {config.shard_key_column!r}"
            )
    for row, value in zip(missing, route.placement.new_ids(len(missing), keys), strict=True):
        row[key] = value


def bulk_insert(
    target: Target,
    entity: Any,
    rows: Iterable[Mapping[str, Any]],
    *,
    shard_map: ShardMap | None = None,
) -> list[Any]:
    """Insert ``rows`` (dicts keyed by column key) on their shards; returns their ids.

    ``target`` is a sharded session (the rows join its transaction) or a mapping of
    shard name to engine (one transaction per shard) or connection. Rows without an id
    get one; rows of a table routed by its parent need the parent's id.
    """
    table = _table_of(entity)
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
    for shard in sorted(groups, key=router.order):
        if isinstance(target, ShardedIdSession):
            target.connection(bind_arguments={"shard_id": shard}).execute(statement, groups[shard])
            continue
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
