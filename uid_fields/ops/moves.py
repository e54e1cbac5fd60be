"""Moving logical shards from one database to another on a live system.

Ids never change when a server fills up: a range of logical shards changes database.
``ShardMove`` does the data side of that, for both ORM adapters, which only hand in each
table as a ``RowStore`` (read a batch of rows ordered by primary key, write a batch):

1. **Copy** (``copy()``). Every table, parents before children, is walked in primary-key
   order in batches, on the source and the target side by side (a merge join, so memory
   is bounded by the batch). Rows of the moved logical shards missing on the target are
   inserted; until the new map is deployed the target's copy is made equal to the
   source (rows changed since are updated, rows gone from the source are deleted). The
   walk's position is saved after every batch in a state file, so a stopped run resumes.
2. **Catch up.** Writes go on during the copy, to the source. A second walk starts at the
   first id made since the copy began (less a margin for clock skew between writers):
   ids are time-ordered, so rows written meanwhile are found by their id's time, not by
   walking the table again. Ids that carry no time (locality UUIDs) are walked whole.
3. **Switch** (``switch()``). The write fence (``uid_fields.ops.fences``) closes the
   range on the source, then a last catch-up and a verify run while nothing can change:
   the target is then an exact copy, and the new map can be deployed. Writes of the
   range fail with ``ShardMoveFencedError`` (retryable) until they reach the target.
4. **Verify** (``verify()``). Per logical shard, the row count and a checksum of the rows
   are compared on both sides; logical shards that differ are copied again, then checked
   again.
5. **Clean up** (``cleanup()``), once the new map gives the range to the target: the
   source's rows of the range are deleted in batches, children first, and only rows the
   target holds: a row that never reached the target is kept and reported. The fence
   opens for deletes first, and is removed once nothing is kept.

Rows of the range are selected in SQL where the route is arithmetic on the id
(``uid_fields.predicates``), else checked in Python a batch at a time.

Progress and reports live in ``move_reports``; each pass is logged on ``uid_fields.moves``
(docs/logging.md).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..ids.layouts import IntLayout
from ..placement import Placement
from ..placement.predicates import logical_range_sql
from .fences import FenceRunner, MoveFence
from .move_reports import CleanupReport, MoveReport, Progress, Ticker, VerifyReport
from .move_state import MoveState, MoveStateMismatch, database_identity

__all__ = [
    "CleanupReport",
    "MoveFence",
    "MoveReport",
    "MoveState",
    "MoveStateMismatch",
    "MovedTable",
    "Progress",
    "RowStore",
    "ShardMove",
    "VerifyReport",
    "database_identity",
]

log = logging.getLogger("uid_fields.moves")

Row = tuple[Any, ...]
_Sums = dict[int, list[int]]

#: Rows written this long before a pass began are still looked for by the next catch-up:
#: it covers clocks that differ between the processes that make ids.
DEFAULT_MARGIN_MS = 60_000


class RowStore(FenceRunner, Protocol):
    """One table as an adapter exposes it.

    Rows are tuples of column values with the primary key first; ``route_index`` is the
    position of the value that places the row (its id, or its parent's id). The fence
    runs its SQL through it too (``FenceRunner``).
    """

    label: str
    route_index: int

    @property
    def integrity_error(self) -> type[Exception]:
        """What a write that breaks a constraint raises (a child whose parent is missing)."""

    def column_sql(self, database: str) -> str:
        """The quoted routing column, for SQL predicates."""

    def read(
        self, database: str, *, after: Any, upto: Any, limit: int, where: str | None
    ) -> list[Row]:
        """Up to ``limit`` rows with ``after < pk <= upto`` (None: no bound) that satisfy
        the SQL ``where`` (None: every row), ordered by primary key."""

    def count(self, database: str, where: str | None) -> int: ...

    def writing(self, database: str) -> AbstractContextManager[Any]:
        """A transaction on ``database`` around one batch's writes."""

    def insert(self, database: str, rows: Sequence[Row]) -> None: ...

    def update(self, database: str, rows: Sequence[Row]) -> None: ...

    def delete(self, database: str, keys: Sequence[Any]) -> None: ...


@dataclass(frozen=True)
class MovedTable:
    """A table whose rows follow ``placement`` (its own ids', or its parent's)."""

    store: RowStore
    placement: Placement
    #: The layout of the primary keys when they carry their time (the catch-up starts
    #: at the first key of a time); None for keys without time (walked whole).
    key_layout: IntLayout | None = None


def _digest(row: Row) -> int:
    return int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "big")


class ShardMove:
    """Move logical shards ``low`` to ``high - 1`` from ``source`` to ``target``.

    ``tables`` come parents first. ``state`` is a file that lets a stopped run resume
    (None: start over each time, which is safe, only slower). ``on_progress`` receives a
    ``Progress`` about twice a second and at the end of every pass.
    """

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
        self._source_sums: dict[str, _Sums] = {}
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

    def _fingerprint(self, table: MovedTable) -> list[int]:
        """``[rows, checksum]`` of the source's range of ``table``."""
        count = total = 0
        for rows in self._rows_of(table, self.source):
            count += len(rows)
            total = (total + sum(_digest(row) for row in rows)) % (1 << 64)
        return [count, total]

    @property
    def after_switch(self) -> bool:
        """Whether the target may take writes now (switched, or the map deployed):
        from then on nothing is copied, repaired or mirrored onto it."""
        return self.deployed or self.state.switched

    def _ticker(self, table: MovedTable, phase: str, total: int | None = None) -> Ticker:
        return Ticker(self.on_progress, table.store.label, phase, total)

    # -- copy and catch up ---------------------------------------------------------------
    def _sync(
        self,
        table: MovedTable,
        phase: str,
        after: Any,
        *,
        only: set[int] | None = None,
        checkpoint: bool = False,
    ) -> MoveReport:
        """Make the target's rows of the range (from key ``after`` on) the source's."""
        store = table.store
        report = MoveReport(store.label, phase)
        mirror = not self.deployed  # before the switch, the target holds copies only
        total = None
        if phase == "copy":
            total = store.count(self.source, self._where(table, self.source))
        ticker = self._ticker(table, phase, total)
        for source, target, key, walked in self._pairs(table, after, only):
            theirs = {row[0]: row for row in target}
            ours = {row[0] for row in source}
            missing = [row for row in source if row[0] not in theirs]
            changed = [row for row in source if row[0] in theirs and theirs[row[0]] != row]
            gone = [row[0] for row in target if row[0] not in ours]
            if not mirror:
                changed, gone = [], []
            writes = [(store.insert, missing), (store.update, changed), (store.delete, gone)]
            try:
                with store.writing(self.target):
                    for write, items in writes:
                        if items:
                            write(self.target, items)
            except store.integrity_error:
                # A row whose parent was written after the parent's table was walked:
                # each write alone, and what still fails waits for the next pass.
                done = [[x for x in items if self._alone(store, w, x)] for w, items in writes]
                report.skipped += sum(len(items) for _w, items in writes) - sum(map(len, done))
                missing, changed, gone = done
            report.read += len(source)
            report.inserted += len(missing)
            report.updated += len(changed)
            report.deleted += len(gone)
            if checkpoint:
                self.state.cursors[store.label] = key
                self.state.save()
            ticker.tick(walked)
        ticker.end()
        log.info("%s", report)
        return report

    def copy(self) -> list[MoveReport]:
        """Copy the range (resuming a stopped copy), then catch up with rows written
        since the copy began. Safe to run again at any time: it only catches up.

        Nothing at all once switched or deployed: the target may take the range's writes
        then, and a source row it lacks may be one the application deleted there (copying
        it would bring it back); ``verify()`` tells those apart from rows never copied.
        """
        self.state.refuse_if_finished()
        if self.after_switch:
            log.info("%r: switched or deployed: nothing is copied any more", self)
            return []
        reports = []
        log.info(
            "%r: copy and catch-up (%s)",
            self,
            "resuming" if self.state.started_ms is not None else "from the start",
        )
        if self.state.started_ms is None:
            self.state.started_ms = self.clock_ms()
            self.state.save()
        for table in self.tables:
            label = table.store.label
            if label in self.state.done:
                continue
            after = self.state.cursors.get(label)
            reports.append(self._sync(table, "copy", after, checkpoint=True))
            self.state.done.add(label)
            self.state.save()
        since = self.state.caught_up_ms or self.state.started_ms
        began = self.clock_ms()
        for table in self.tables:
            after = None
            if table.key_layout is not None:
                first = table.key_layout.min_id(max(since - self.margin_ms, 0), clamp=True)
                after = first - 1  # the walk takes keys above ``after``
            reports.append(self._sync(table, "catch-up", after))
        self.state.caught_up_ms = began
        self.state.save()
        return reports

    # -- verify --------------------------------------------------------------------------
    def _sums(self, table: MovedTable) -> tuple[_Sums, _Sums, dict[int, int]]:
        """Per logical shard: (rows, checksum) on each side, and source rows the target
        lacks."""
        sides: tuple[_Sums, _Sums] = ({}, {})
        missing: dict[int, int] = {}
        ticker = self._ticker(table, "verify")
        for source, target, _key, walked in self._pairs(table, None):
            for rows, sums in zip((source, target), sides, strict=True):
                for row in rows:
                    entry = sums.setdefault(self._logical(table, row), [0, 0])
                    entry[0] += 1
                    entry[1] = (entry[1] + _digest(row)) % (1 << 64)
            there = {row[0] for row in target}
            for row in source:
                if row[0] not in there:
                    logical = self._logical(table, row)
                    missing[logical] = missing.get(logical, 0) + 1
            ticker.tick(walked)
        ticker.end()
        return sides[0], sides[1], missing

    def verify(self, *, repair: bool = True, rounds: int = 3) -> list[VerifyReport]:
        """Check the copy of every table.

        Before the new map is deployed the target must equal the source: each logical
        shard's row count and checksum are compared, and with ``repair`` the differing
        ones are copied again and checked again, up to ``rounds`` times (while writes go
        on, a shard can change between two looks); the source's sums are kept for the
        switch's fingerprint. Once switched or deployed, nothing is repaired: see
        ``_check_after_switch()``.
        """
        if self.after_switch:
            return [self._check_after_switch(table) for table in self.tables]
        reports = []
        deployed = self.deployed
        for table in self.tables:
            for attempt in range(rounds):
                source, target, missing = self._sums(table)
                if deployed:
                    differing = sorted(missing)
                else:
                    shards = source.keys() | target.keys()
                    differing = sorted(n for n in shards if source.get(n) != target.get(n))
                self._source_sums[table.store.label] = source
                report = VerifyReport(
                    table.store.label,
                    source_rows=sum(v[0] for v in source.values()),
                    target_rows=sum(v[0] for v in target.values()),
                    logical_shards=len(source.keys() | target.keys()),
                    differing=differing,
                    missing=sum(missing.values()),
                    deployed=deployed,
                )
                if report.ok or not repair or attempt == rounds - 1:
                    break
                self._sync(table, "repair", None, only=set(report.differing))
            log.log(logging.INFO if report.ok else logging.WARNING, "%s", report)
            reports.append(report)
        return reports

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
            sql = self.fence.sql
            wanted = {sql.trigger(t, e) for t in sql.tables for e in ("INSERT", "UPDATE")}
            self._held = wanted <= set(self.fence.installed())
        return self._held

    def _check_after_switch(self, table: MovedTable) -> VerifyReport:
        """After the switch the target is the owner: its rows may rightly differ from
        the source (updated, inserted, deleted by the application). What must hold is
        that every source row reached it: a source row it lacks is one the application
        deleted there since, when the source still matches the switch's fingerprint;
        otherwise nothing tells it from a row never copied, and it is reported."""
        count = total = target_rows = 0
        missing: dict[int, int] = {}
        shards: set[int] = set()
        ticker = self._ticker(table, "verify")
        for source, target, _key, walked in self._pairs(table, None):
            shards.update(self._logical(table, row) for row in (*source, *target))
            count += len(source)
            total = (total + sum(_digest(row) for row in source)) % (1 << 64)
            target_rows += len(target)
            there = {row[0] for row in target}
            for row in source:
                if row[0] not in there:
                    logical = self._logical(table, row)
                    missing[logical] = missing.get(logical, 0) + 1
            ticker.tick(walked)
        ticker.end()
        trusted = self._trusted(table, [count, total])
        report = VerifyReport(
            table.store.label,
            source_rows=count,
            target_rows=target_rows,
            logical_shards=len(shards),
            differing=[] if trusted else sorted(missing),
            missing=0 if trusted else sum(missing.values()),
            deployed=True,
            deleted_since=sum(missing.values()) if trusted else 0,
        )
        log.log(logging.INFO if report.ok else logging.WARNING, "%s", report)
        return report

    # -- the switch ----------------------------------------------------------------------
    @property
    def fence(self) -> MoveFence:
        """The write fence of this move on the source (see ``uid_fields.ops.fences``)."""
        return MoveFence(
            self.name,
            self.source,
            [(t.store, t.placement, self._ranges[t.store.label]) for t in self.tables],
        )

    def switch(self, *, rounds: int = 5) -> tuple[list[MoveReport], list[VerifyReport]]:
        """Close the range on the source (the fence), catch up and verify while nothing
        can change there, and return what the passes did: when every verify report is
        ``ok``, the target is an exact copy and the new map can be deployed. The fence
        stays until ``cleanup()`` (or ``unfence()`` calls the switch off).

        The switch records the source's fingerprint per table (rows and checksum, from
        the last verify): the rows present at the switch. The fence keeps the source so,
        and later runs compare: a source row the target lacks was then deleted there.
        Refused once the new map is deployed. Run again when done (a kill after the
        switch, say), it copies nothing (a copy would overwrite the target's new writes):
        it checks the source against its fingerprint, behind the fence, and returns no
        copy reports; a stopped switch is simply run again."""
        if self.deployed:
            raise ValueError(
                f"the map already gives logical shards {self._span()} to {self.target!r}: "
                "the switch comes before the new map is deployed"
            )
        self.state.refuse_if_finished()
        if self.state.switched:
            return [], self._switched_again()
        log.info("%r: closing the range on %s for the switch", self, self.source)
        self.fence.install()
        copied = self.copy()
        checked = self.verify(rounds=rounds)
        if all(check.ok for check in checked):
            self.state.fingerprints = {
                label: [
                    sum(v[0] for v in sums.values()),
                    sum(v[1] for v in sums.values()) % (1 << 64),
                ]
                for label, sums in self._source_sums.items()
            }
            self.state.switched = True
            self.state.save()
        return copied, checked

    def _switched_again(self) -> list[VerifyReport]:
        """A switch run again once done (after a kill, say): it copies nothing (the
        target may take writes already) and only checks that the source is still as
        the switch recorded it, behind the fence, and on the target."""
        self.fence.install()  # idempotent; it must hold until the cleanup
        changed = [
            t.store.label
            for t in self.tables
            if self.state.fingerprints.get(t.store.label) != self._fingerprint(t)
        ]
        if changed:
            raise ValueError(
                f"the source's rows of {', '.join(changed)} changed since the switch (was "
                "the fence removed?): unfence, then switch again before deploying"
            )
        return self.verify()

    def unfence(self) -> None:
        """Call a switch off before the new map is deployed: remove the fence, and
        forget the switch (the source takes the range's writes again; switch again
        later). Refused once deployed: the fence then goes with ``cleanup()``."""
        if self.deployed:
            raise ValueError(
                f"the map gives logical shards {self._span()} to {self.target!r}: writes "
                f"that reached {self.source!r} now would be lost; the fence goes with the "
                "cleanup"
            )
        self.fence.remove()
        self.state.switched, self.state.fingerprints = False, {}
        self.state.save()

    # -- cleanup -------------------------------------------------------------------------
    def cleanup(self, *, dry_run: bool = False) -> list[CleanupReport]:
        """Delete the source's copies of the range, children first, and remove the fence.

        Deleted: the source rows the target holds, and, when the switch's fingerprint
        shows the source unchanged since (``_trusted``), the rows the application deleted
        on the target after the switch. Kept, and reported: rows not on the target that
        nothing tells from rows never copied, and rows a kept row still refers to (a
        parent whose child is kept: the database refuses its delete, which is then
        tried row by row instead of failing the batch). The fence opens for deletes
        first; it goes, and an existing state file is marked finished, once nothing is
        kept. Refused until the maps give the range to the target. With ``dry_run``
        nothing is deleted: the reports count what would be deleted and kept.
        """
        if not self.deployed:
            raise ValueError(
                f"the map still gives logical shards {self._span()} to "
                f"{self.source!r}: switch, deploy the new map, then clean up"
            )
        trusted = self._cleanup_trust(dry_run)
        fence = self.fence
        if not dry_run:
            fence.remove(["DELETE"])  # deleting the copies; inserts and updates stay closed
        reports = []
        for table in reversed(self.tables):
            label = table.store.label
            report = CleanupReport(label, dry_run=dry_run)
            ticker = self._ticker(table, "cleanup")
            for source, target, _key, walked in self._pairs(table, None):
                there = {row[0] for row in target}
                absent = [row[0] for row in source if row[0] not in there]
                doomed = [row[0] for row in source if row[0] in there]
                if label in trusted:  # deleted on the target since the switch
                    report.deleted_since += len(absent)
                    doomed += absent
                else:
                    for key in absent:
                        report.keep(key)
                if doomed and not dry_run:
                    refused = self._delete_source(table.store, doomed)
                    for key in refused:
                        report.keep(key, referenced=True)
                    doomed = [key for key in doomed if key not in set(refused)]
                report.deleted += len(doomed)
                ticker.tick(walked)
            ticker.end()
            log.log(logging.WARNING if report.kept else logging.INFO, "%s", report)
            reports.append(report)
        if not dry_run and not any(r.kept for r in reports):
            fence.remove()  # the move is over: the source holds nothing of the range
            if self.state.path is not None and self.state.path.exists():
                self.state.finished_ms = self.clock_ms()
                self.state.save()  # a later run with this file is refused, not resumed
        return reports

    def _cleanup_trust(self, dry_run: bool) -> set[str]:
        """The tables whose source rows were all on the target at the switch (so a
        row the target lacks was deleted there since); fixed when a cleanup first
        begins, so a resumed one (after deleting some) keeps the same answer."""
        if self.state.cleaning is not None:
            return {t.store.label for t in self.tables if self._trusted(t, None)}
        found = {
            t.store.label
            for t in self.tables
            if self.state.switched and self._trusted(t, self._fingerprint(t))
        }
        if not dry_run and self.state.switched:
            self.state.cleaning = sorted(found)
            self.state.save()
        return found

    def _delete_source(self, store: RowStore, keys: list[Any]) -> list[Any]:
        """Delete ``keys`` on the source; the keys whose delete the database refused
        (a row a kept row refers to), each tried alone."""
        try:
            with store.writing(self.source):
                store.delete(self.source, keys)
        except store.integrity_error:
            return [k for k in keys if not self._alone(store, store.delete, k, self.source)]
        return []
