"""Placement audit: rows stored on a database their id does not name.

A row lands off its shard through a restore, a copy made by hand, or a write that went
around the checks. ``foreign_condition(placement, alias)`` gives the SQL predicate that
selects, among the rows of one database, those whose ids name another database, for the
routes whose logical shard is arithmetic on the id (Instagram's shard bits or any node
field, the server digits of decimal ids): the database finds them by itself, and nothing
is loaded into Python. Other routes (the mixed modulo of snowflakes, locality blocks,
uniqid digits) are checked by ``foreign_ids`` over the ids in batches, with memory
bounded by the batch. A row that lives with its parent (its own id names no shard) is
placed by the parent's id: the same predicate on that column, or ``foreign_rows`` over
``(row id, parent id)`` pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from ..placement import Placement
from ..placement.predicates import logical_range_sql

__all__ = ["AuditResult", "foreign_condition", "foreign_ids", "foreign_rows"]


@dataclass
class AuditResult:
    """What one database holds that belongs elsewhere."""

    table: str
    database: str
    misplaced: int = 0
    samples: list[Any] = field(default_factory=list)
    method: str = "sql"  # "sql": counted by the database; "scan": ids checked in batches

    def __str__(self) -> str:
        shown = ", ".join(str(s) for s in self.samples)
        tail = f" (e.g. {shown})" if self.samples else ""
        return f"{self.table} on {self.database}: {self.misplaced} misplaced{tail} [{self.method}]"


def foreign_condition(placement: Placement, alias: str, column: str) -> str | None:
    """An SQL predicate on ``column`` true for ids that ``alias`` does not own; None when
    the route is not arithmetic on the id (then use ``foreign_ids``)."""
    shard_map = placement.shard_map
    if shard_map is None:
        return None
    low, high = shard_map.ranges[alias]
    inside = logical_range_sql(shard_map.route, column, low, high)
    return None if inside is None else f"NOT {inside}"


def foreign_ids(
    placement: Placement, alias: str, ids: Iterable[Any], *, batch: int = 5000
) -> Iterator[Any]:
    """The ids among ``ids`` (read lazily, ``batch`` at a time) that ``alias`` does not own."""
    return foreign_rows(placement, alias, ((value, value) for value in ids), batch=batch)


def foreign_rows(
    placement: Placement, alias: str, rows: Iterable[tuple[Any, Any]], *, batch: int = 5000
) -> Iterator[Any]:
    """The row ids among ``rows`` of ``(row id, placing id)`` whose placing id names
    another database than ``alias``: the row's own id, or, for a row that lives with
    its parent, the parent's id. Read lazily, ``batch`` at a time."""
    it = iter(rows)
    while chunk := list(islice(it, batch)):
        for row, value in chunk:
            try:
                if placement.database_of(value) != alias:
                    yield row
            except (TypeError, ValueError):
                yield row  # no id at all: it belongs nowhere, least of all here
