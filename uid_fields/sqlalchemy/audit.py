"""``audit(session, Model)``: rows of a table stored on a shard their id does not name."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, text

from ..ops.audit import AuditResult, foreign_condition, foreign_ids
from .routing import table_of
from .session import ShardedIdSession

__all__ = ["audit"]


def audit(
    session: ShardedIdSession, entity: Any, *, samples: int = 5, batch: int = 5000
) -> list[AuditResult]:
    """One result per shard of the table's map; counted in SQL where the route allows."""
    table = table_of(entity)
    route = session.router.table_route(table)
    if route is None or route.by_parent:
        return []
    placement, column = route.placement, route.column
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
            found = select(column).where(where).order_by(column).limit(samples)
            result.samples = list(connection.execute(found).scalars())
        else:
            result.method = "scan"
            ids = connection.execution_options(yield_per=batch).execute(
                select(column).order_by(column)
            )
            for value in foreign_ids(placement, shard, ids.scalars(), batch=batch):
                result.misplaced += 1
                if len(result.samples) < samples:
                    result.samples.append(value)
        results.append(result)
    return results
