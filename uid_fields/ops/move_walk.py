"""What every step of a shard move stands on: its range, and the walk over both sides.

``MoveWalk`` checks a move's arguments once, turns the range into each table's own logical
shards, finds which database the maps give it to (before or after the deploy), and walks
the source and the target side by side in primary-key order, a batch at a time (a merge
join: memory is bounded by the batch). It also holds what the switch vouches for: the
source's fingerprint, and whether the fence still holds. The steps built on it live apart
(``moves``: copy, catch-up, verify, switch; ``move_cleanup``: the cleanup), each reading
the same range the same way; ``ShardMove`` is the one class users see.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..placement.predicates import logical_range_sql
from .fences import MoveFence
from .move_reports import Progress, Ticker
from .move_state import MoveState, database_identity
from .move_tables import MovedTable, Row, RowStore, ShardSums, row_digest

__all__ = ["DEFAULT_MARGIN_MS", "MoveWalk"]

#: Rows written this long before a pass began are still looked for by the next catch-up:
#: it covers clocks that differ between the processes that make ids.
DEFAULT_MARGIN_MS = 60_000


class MoveWalk:
    """A move's range and the walk over its source and target (see ``ShardMove``)."""

    def __init__(
        self,
        tables: Sequence[MovedTable],
        *,
        source: str,
        target: str,
        low: int | None = None,
        high: int | None = None,
        space: int | None = None,
        batch: int = 1000,
        state: str | Path | None = None,
        margin_ms: int = DEFAULT_MARGIN_MS,
        on_progress: Callable[[Progress], None] | None = None,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        map_name: str | None = None,
    ) -> None:
        if source == target:
            raise ValueError(f"the source and the target are both {source!r}")
        if (low is None) != (high is None):
            raise TypeError("give both low and high, or neither (the source's whole range)")
        if low is not None and high is not None and not 0 <= low < high:
            raise ValueError(f"the range {low}:{high} is empty (half-open: start:stop)")
        if batch < 1:
            raise ValueError(f"the batch size must be positive, got {batch}")
        self.tables = list(tables)
        self.source, self.target, self.low, self.high = source, target, low, high
        self.batch = batch
        self.margin_ms = margin_ms
        self.on_progress = on_progress
        self.clock_ms = clock_ms
        self.space = space or max((t.placement.logical_shards for t in self.tables), default=1)
        if high is not None and high > self.space:
            raise ValueError(f"the range {low}:{high} exceeds the {self.space} logical shards")
        self._ranges = {t.store.label: self._range(t) for t in self.tables}
        owners = {t.store.label: self._owners(t) for t in self.tables}
        if len(set(owners.values())) > 1:
            raise ValueError(
                f"the maps disagree on who owns the range ({owners}): deploy the new map "
                "for every table at once, or move the tables apart"
            )
        #: Whether the maps already give the range to the target (the new map is live).
        self.deployed = set(owners.values()) == {self.target}
        span = "all" if low is None else f"{low}:{high}"
        self.map_name = map_name
        #: What the move is called: in its state file, its fence and the fence's errors.
        self.name = f"{source}->{target} {span}"
        if map_name:
            self.name = f"{map_name} {self.name}"
        self._source_sums: dict[str, ShardSums] = {}
        #: Keys this process inserted on the target, per table: copies, whatever time
        #: their ids carry (``ShardMove._refuse_target_writes``).
        self._inserted: dict[str, set[Any]] = {}
        self._held: bool | None = None
        belongs = None if state is None else self._belongs()
        self.state = MoveState(state, f"{source}->{target} {span}", belongs)

    def _belongs(self) -> dict[str, Any]:
        """What the state file records of this move (compared on every later run)."""
        # the table named first: the same one on every run, whatever the tables' order
        store = min((t.store for t in self.tables), key=lambda s: s.table_name, default=None)
        return {
            "map": self.map_name,
            "source": None if store is None else database_identity(store, self.source),
            "target": None if store is None else database_identity(store, self.target),
            "tables": {label: list(span) for label, span in self._ranges.items()},
        }

    def __repr__(self) -> str:
        return f"<ShardMove {self.source} -> {self.target} logical shards {self._span()}>"

    def _span(self) -> str:
        if self.low is None or self.high is None:
            return f"of {self.source}"
        return f"{self.low}..{self.high - 1}"

    def _range(self, table: MovedTable) -> tuple[int, int]:
        """The moved logical shards in the table's own logical space.

        Without a range, the source's whole range in the table's map (the target's, once
        a map without the source is deployed). A range is given over ``space`` logical
        shards; a route with a multiple of that many (Instagram's 8192 beside a snowflake
        map's 1024) sees each one as that many of its own, as an even spread and
        co-located children do.
        """
        theirs, label = table.placement.logical_shards, table.store.label
        if self.low is None or self.high is None:
            shard_map = table.placement.shard_map
            ranges = {} if shard_map is None else shard_map.ranges
            found = ranges.get(self.source) or ranges.get(self.target)
            if found is None:
                raise ValueError(f"{label}: neither database is in its shard map")
            return found
        if theirs % self.space == 0:
            factor = theirs // self.space
            return self.low * factor, self.high * factor
        if self.space % theirs == 0:
            factor = self.space // theirs
            if self.low % factor == 0 and self.high % factor == 0:
                return self.low // factor, self.high // factor
        raise ValueError(
            f"{label}: its ids have {theirs} logical shards, and the range {self.low}:"
            f"{self.high} of {self.space} is not a whole number of them"
        )

    def _owners(self, table: MovedTable) -> str:
        """The one database the map gives the table's moved logical shards to: the
        source (before the switch) or the target (after); ``ValueError`` otherwise."""
        shard_map, label = table.placement.shard_map, table.store.label
        if shard_map is None:
            raise ValueError(f"{label}: its ids have no shard map")
        low, high = self._ranges[label]
        owners = {shard_map.database(n) for n in range(low, high)}
        if owners not in ({self.source}, {self.target}):
            raise ValueError(
                f"{label}: the map gives logical shards {low}..{high - 1} to "
                f"{sorted(owners)}; a move needs them all on {self.source!r} (before) "
                f"or all on {self.target!r} (after the new map is deployed)"
            )
        return owners.pop()

    # -- walking both sides --------------------------------------------------------------
    def _where(self, table: MovedTable, database: str) -> str | None:
        column = table.store.column_sql(database)
        return logical_range_sql(table.placement.route, column, *self._ranges[table.store.label])

    def _logical(self, table: MovedTable, row: Row) -> int:
        return table.placement.logical_shard_of(row[table.store.route_index])

    def _side(
        self, table: MovedTable, database: str, after: Any, upto: Any
    ) -> tuple[list[Row], Any]:
        """A batch of rows and the last key read (before filtering in Python)."""
        rows = table.store.read(
            database, after=after, upto=upto, limit=self.batch, where=self._where(table, database)
        )
        return rows, (rows[-1][0] if len(rows) == self.batch else None)

    def _pairs(
        self, table: MovedTable, after: Any, only: set[int] | None = None
    ) -> Iterator[tuple[list[Row], list[Row], Any, int]]:
        """Batches ``(source rows, target rows, last key, source rows walked)`` of the
        range, in key order (rows walked include those checked and left in Python).

        Both sides cover the same keys: the source's batch sets the upper bound, and a
        full target batch that ends lower pulls it down.
        """
        low, high = self._ranges[table.store.label]

        def keep(row: Row) -> bool:
            logical = self._logical(table, row)
            return low <= logical < high and (only is None or logical in only)

        cursor = after
        while True:
            source, upper = self._side(table, self.source, cursor, None)
            target, target_end = self._side(table, self.target, cursor, upper)
            if target_end is not None and (upper is None or target_end < upper):
                upper = target_end
                source = [row for row in source if row[0] <= upper]
            if not source and not target:
                return
            last = upper if upper is not None else max(r[0] for r in (*source, *target))
            yield [r for r in source if keep(r)], [r for r in target if keep(r)], last, len(source)
            if upper is None:
                return
            cursor = upper

    def _alone(
        self,
        store: RowStore,
        write: Callable[[str, Sequence[Any]], None],
        item: Any,
        database: str | None = None,
    ) -> bool:
        """One write in a transaction of its own; False when the database (the target
        unless said) refused it."""
        database = database or self.target
        try:
            with store.writing(database):
                write(database, [item])
        except store.integrity_error:
            return False
        return True

    def _rows_of(self, table: MovedTable, database: str) -> Iterator[list[Row]]:
        """The range's rows of one side, a batch at a time, in key order."""
        low, high = self._ranges[table.store.label]
        after = None
        while True:
            rows = table.store.read(
                database,
                after=after,
                upto=None,
                limit=self.batch,
                where=self._where(table, database),
            )
            yield [row for row in rows if low <= self._logical(table, row) < high]
            if len(rows) < self.batch:
                return
            after = rows[-1][0]

    @property
    def after_switch(self) -> bool:
        """Whether the target may take writes now (switched, or the map deployed):
        from then on nothing is copied, repaired or mirrored onto it."""
        return self.deployed or self.state.switched

    def _ticker(self, table: MovedTable, phase: str, total: int | None = None) -> Ticker:
        return Ticker(self.on_progress, table.store.label, phase, total)

    # -- what the switch vouches for -----------------------------------------------------
    def _fingerprint(self, table: MovedTable) -> list[int]:
        """``[rows, checksum]`` of the source's range of ``table``."""
        count = total = 0
        for rows in self._rows_of(table, self.source):
            count += len(rows)
            total = (total + sum(row_digest(row) for row in rows)) % (1 << 64)
        return [count, total]

    def _trusted(self, table: MovedTable, fingerprint: list[int] | None) -> bool:
        """Whether every source row of ``table`` was on the target at the switch: the
        switch recorded the source's fingerprint and the source still matches it (the
        fence held), or a cleanup that began so still runs behind the insert and update
        fence."""
        label = table.store.label
        if not self.state.switched or label not in self.state.fingerprints:
            return False
        if self.state.cleaning is not None:
            return label in self.state.cleaning and self._fence_held()
        return fingerprint == self.state.fingerprints[label]

    def _fence_held(self) -> bool:
        """Whether the fence still refuses inserts and updates on the source."""
        if self._held is None:
            self._held = self.fence.holds(("INSERT", "UPDATE"))
        return self._held

    @property
    def fence(self) -> MoveFence:
        """The write fence of this move on the source (see ``uid_fields.ops.fences``)."""
        return MoveFence(
            self.name,
            self.source,
            [(t.store, t.placement, self._ranges[t.store.label]) for t in self.tables],
        )
