"""``audit(session, Model)``: rows of a table stored on a shard their id does not name."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text

from ..ops.audit import AuditResult, foreign_condition, foreign_rows
from .routing import table_of
from .session import ShardedIdSession

__all__ = ["audit"]


def audit(
    session: ShardedIdSession, entity: Any, *, samples: int = 5, batch: int = 5000
) -> list[AuditResult]:
    """One result per shard of the table's map; counted in SQL where the route allows.

    A table routed by its parent (no uid of its own, or one that names no shard) is
    placed by the parent id in its foreign key; its rows are reported by their primary
    key (a tuple when it has several columns).
    """
    table = table_of(entity)
    route = session.router.table_route(table)
    if route is None:
        return []
    placement, column = route.placement, route.column
    keys = list(table.primary_key.columns)
    # Each row's primary key, then the column that places it (the key itself, or a
    # column of it, for a table sharded by its own id or by a key column).
    selected = keys if column in keys else [*keys, column]
    place = selected.index(column)
    results = []
    for shard in placement.databases:
        connection = session.connection(bind_arguments={"shard_id": shard})
        preparer = connection.dialect.identifier_preparer
        name = f"{preparer.format_table(table)}.{preparer.quote(column.name)}"
        condition = foreign_condition(placement, shard, name)
        result = AuditResult(table.name, shard)
        if condition is not None:
            where = text(condition)
            result.misplaced = int(
                connection.execute(
                    select(func.count()).select_from(table).where(where)
                ).scalar_one()
            )
            found = select(*keys).where(where).order_by(*keys).limit(samples)
            result.samples = [_row_id(row) for row in connection.execute(found)]
        else:
            result.method = "scan"
            rows = connection.execution_options(yield_per=batch).execute(
                select(*selected).order_by(*keys)
            )
            pairs = ((_row_id(row[: len(keys)]), row[place]) for row in rows)
            for value in foreign_rows(placement, shard, pairs, batch=batch):
                result.misplaced += 1
                if len(result.samples) < samples:
                    result.samples.append(value)
        results.append(result)
    return results


def _row_id(row: Any) -> Any:
    """A primary key as users write it: the value, or a tuple of several."""
    values = tuple(row)
    return values[0] if len(values) == 1 else values
