"""The write fence of a shard move: the moving range closed on the source database.

From the final catch-up of a move until the new map is deployed everywhere, no write of
the moving range may reach the source: a write there after the last copy would be lost
(an insert or an update) or brought back (a delete) once the new database owns the
range. ``MoveFence`` closes exactly that range, table by table, with triggers in the
source database (SQL in ``uid_fields.sql.fences``): a refused write raises
``ShardMoveFencedError`` in the application, through either ORM, and can be retried;
writes of every other logical shard go on. A table whose route SQL cannot compute
(snowflakes' mixed modulo, locality UUIDs, uniqids) is closed whole: still exact, only
wider.

``ShardMove.close()`` installs it, ``ShardMove.cleanup()`` removes it; both are
idempotent, and the triggers are named for the move (``uid_fields_fence_<tag>_...``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

from ..placement import Placement
from ..placement.predicates import logical_range_sql
from ..sql.fences import EVENTS, FencedTable, FenceSql, quote

__all__ = ["FenceRunner", "MoveFence"]

log = logging.getLogger("uid_fields.moves")

#: Installing waits for writers; a deadlock with one of them (SQLite: a lock it could
#: not wait for) is retried this often.
_ATTEMPTS = 10
_RETRIED = ("deadlock", "database is locked")


class FenceRunner(Protocol):
    """What a fence needs of a table's adapter (``RowStore`` includes it)."""

    label: str
    #: The table's name in the database, and its routing column's, unquoted.
    table_name: str
    route_column: str

    def vendor(self, database: str) -> str:
        """``postgresql``, ``mysql`` (MariaDB too) or ``sqlite``."""

    def run(self, database: str, statements: Sequence[str]) -> list[tuple[Any, ...]]:
        """Run ``statements`` in one transaction (where the database has transactional
        DDL); the rows of the last one, if it returns rows."""


class MoveFence:
    """The fence of move ``move`` over ``tables`` on ``database``.

    ``tables`` are ``(runner, placement, (low, high))``: the table, how its rows are
    placed and its moving logical shards (in its own logical space).
    """

    def __init__(
        self,
        move: str,
        database: str,
        tables: Sequence[tuple[FenceRunner, Placement, tuple[int, int]]],
    ) -> None:
        if not tables:
            raise ValueError("a fence needs at least one table")
        self.move, self.database = move, database
        self.runner = tables[0][0]
        vendor = self.runner.vendor(database)
        fenced = []
        for runner, placement, (low, high) in tables:
            column = quote(vendor, runner.route_column)
            new = logical_range_sql(placement.route, f"NEW.{column}", low, high)
            old = logical_range_sql(placement.route, f"OLD.{column}", low, high)
            whole = new is None
            fenced.append(
                FencedTable(
                    runner.table_name,
                    runner.label,
                    None if whole else low,
                    None if whole else high,
                    new,
                    old,
                )
            )
        self.sql = FenceSql(move, vendor, fenced)

    def __repr__(self) -> str:
        return f"<MoveFence {self.move} on {self.database}>"

    def _run(self, statements: Sequence[str]) -> list[tuple[Any, ...]]:
        for attempt in range(_ATTEMPTS):
            try:
                return self.runner.run(self.database, statements)
            except Exception as exc:
                said = str(exc).lower()
                if not any(word in said for word in _RETRIED) or attempt == _ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def install(self) -> None:
        """Close the range (again). Returns once every writer that began before has
        committed; a deadlock with a writer is retried."""
        self._run(self.sql.install())
        log.info("%r: installed (%d triggers)", self, len(self.sql.names()))

    def remove(self, events: Sequence[str] = EVENTS) -> None:
        """Open the range for ``events`` (default: remove the whole fence)."""
        self._run(self.sql.remove(events))
        log.info("%r: removed for %s", self, ", ".join(events))

    def installed(self) -> list[str]:
        """The names of the fence's triggers present on the database."""
        rows = self.runner.run(self.database, [self.sql.installed_query()])
        return sorted(str(row[0]) for row in rows)

    def holds(self, events: Sequence[str]) -> bool:
        """Whether the fence's triggers for ``events`` are all in place on every table
        (a cleanup that deletes on the strength of the switch needs inserts and updates
        still refused)."""
        wanted = {self.sql.trigger(table, event) for table in self.sql.tables for event in events}
        return wanted <= set(self.installed())

    @property
    def closed(self) -> bool:
        """Whether every trigger of the fence is in place."""
        return set(self.sql.names()) <= set(self.installed())
