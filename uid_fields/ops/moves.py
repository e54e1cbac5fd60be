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
``abort()`` calls a move off before its switch: it deletes the target's copies, but only
copies (``move_recovery``): a target written to under a new map deployed early is refused,
or its writes are copied back to the source first (``copy_back``).

5. **Clean up** (``cleanup()``), once the new map gives the range to the target: the
   source's rows of the range are deleted in batches, children first, and only rows the
   target holds: a row that never reached the target is kept and reported. The fence
   opens for deletes first, and is removed once nothing is kept.

Rows of the range are selected in SQL where the route is arithmetic on the id
(``uid_fields.predicates``), else checked in Python a batch at a time.

Progress and reports live in ``move_reports``; each pass is logged on ``uid_fields.moves``
(docs/logging.md).

This module holds steps 1 to 4 and the class users build. The rest lives in modules of
its own, each importing only those below it: the tables' contract and the row digest
(``move_tables``), the range and the walk over both sides every step reads the same way
(``move_walk``), the cleanup's rules (``move_cleanup``), the state file (``move_state``),
the reports (``move_reports``) and the write fence (``fences``). Every name callers use
is still importable from here.
"""

from __future__ import annotations

import logging
from typing import Any

from . import move_recovery
from .fences import MoveFence
from .move_cleanup import MoveCleanup
from .move_reports import CleanupReport, MoveReport, Progress, VerifyReport
from .move_state import MoveState, MoveStateMismatch, database_identity
from .move_tables import MovedTable, RowStore, ShardSums, row_digest
from .move_tables import Row as Row
from .move_walk import DEFAULT_MARGIN_MS as DEFAULT_MARGIN_MS

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


class ShardMove(MoveCleanup):
    """Move logical shards ``low`` to ``high - 1`` from ``source`` to ``target``.

    ``tables`` come parents first. ``state`` is a file that lets a stopped run resume
    (None: start over each time, which is safe, only slower). ``on_progress`` receives a
    ``Progress`` about twice a second and at the end of every pass.

    The range and the walk come from ``MoveWalk`` (``move_walk``), ``cleanup()`` from
    ``MoveCleanup`` (``move_cleanup``); copy, catch-up, verify and the switch are here.
    """

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
            self._refuse_target_writes(table, gone)
            if self.state.passed_ms is not None and table.key_layout is not None:
                # copies made after a full pass (few): told apart from target writes
                self._inserted.setdefault(store.label, set()).update(r[0] for r in missing)
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

    def _refuse_target_writes(self, table: MovedTable, gone: list[Any]) -> None:
        """Before the mirror deletes target rows the source lacks: refuse when some were
        never copied (``move_recovery.never_copied``; this process's own inserts are
        copies), as after an early deploy of the new map."""
        copied = self._inserted.get(table.store.label, set())
        late = move_recovery.never_copied(
            [key for key in gone if key not in copied],
            table.key_layout,
            self.state.passed_ms,
            self.margin_ms,
        )
        if not late:
            return
        shown = ", ".join(str(key) for key in late[: move_recovery.SHOWN])
        early = move_recovery.refusal(
            [move_recovery.TargetWrites(table.store.label, len(late), keys=late[:5])],
            source=self.source,
            target=self.target,
            doing="making the copy equal to the source",
            forward=False,
        )
        raise move_recovery.TargetWritten(
            f"{table.store.label}: {self.target} holds {len(late)} rows of the range made "
            f"after the last copy ended (keys {shown}) that the mover never copied: they "
            f"were written there, under a new map deployed early. {early}"
        )

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
        self.state.passed_ms = self.clock_ms()
        self.state.save()
        return reports

    # -- verify --------------------------------------------------------------------------
    def _sums(self, table: MovedTable) -> tuple[ShardSums, ShardSums, dict[int, int]]:
        """Per logical shard: (rows, checksum) on each side, and source rows the target
        lacks."""
        sides: tuple[ShardSums, ShardSums] = ({}, {})
        missing: dict[int, int] = {}
        ticker = self._ticker(table, "verify")
        for source, target, _key, walked in self._pairs(table, None):
            for rows, sums in zip((source, target), sides, strict=True):
                for row in rows:
                    entry = sums.setdefault(self._logical(table, row), [0, 0])
                    entry[0] += 1
                    entry[1] = (entry[1] + row_digest(row)) % (1 << 64)
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
            total = (total + sum(row_digest(row) for row in source)) % (1 << 64)
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
            early = move_recovery.early_deploy(self, switched=self.state.switched, forward=False)
            raise ValueError(
                f"the map already gives logical shards {self._span()} to {self.target!r}: "
                f"the switch comes before the new map is deployed{'; ' + early if early else ''}"
            )
        self.state.refuse_if_finished()
        if self.state.switched:
            return [], self._switched_again()
        log.info("%r: closing the range on %s for the switch", self, self.source)
        self.fence.install()
        try:
            copied = self.copy()
            checked = self.verify(rounds=rounds)
        except move_recovery.TargetWritten:
            self.fence.remove()  # nothing is switched: the source takes writes again
            raise
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

    def abort(self, *, copy_back: bool = False) -> dict[str, int]:
        """Call a move off before its switch: delete the target's copies of the range,
        children first, remove the fence, and forget the state (a new move starts over).

        Only copies are deleted (``move_recovery``): when the target holds rows, or
        versions of rows, that the source does not (written there under a new map
        deployed early), the abort is refused naming them, unless ``copy_back``, which
        copies them to the source first (a row changed on both sides keeps the target's
        version: the portable mover cannot tell which is newer) and looks again. Refused
        under a map that gives the range to the target, and after the switch (call it
        off with ``unfence()`` first). Returns the copies deleted, per table.
        """
        if self.deployed:
            early = move_recovery.early_deploy(self, switched=self.state.switched, forward=False)
            raise ValueError(f"--abort refused: {early or 'the map gives the range to the target'}")
        if self.state.switched:
            raise ValueError(
                f"{self!r} has switched: call the switch off with --unfence first (the "
                f"fence then goes, and {self.source!r} takes the range's writes again)"
            )
        why = self._abort_refusal()
        if why is not None and not copy_back:
            raise ValueError(why)
        if why is not None:
            for copied in move_recovery.copy_back(self):
                log.warning("%r: copied back to %s: %s", self, self.source, copied)
            again = self._abort_refusal()
            if again is not None:  # a process still on the new map writes to the target
                raise ValueError(again)
        deleted: dict[str, int] = {}
        for table in reversed(self.tables):
            label = table.store.label
            deleted[label] = 0
            for rows in self._rows_of(table, self.target):
                if rows:
                    with table.store.writing(self.target):
                        table.store.delete(self.target, [row[0] for row in rows])
                    deleted[label] += len(rows)
        self.fence.remove()
        if self.state.path is not None:
            self.state.path.unlink(missing_ok=True)
        log.info("%r: aborted; the target's copies and the fence are removed", self)
        return deleted

    def _abort_refusal(self) -> str | None:
        return move_recovery.refusal(
            move_recovery.target_writes(self),
            source=self.source,
            target=self.target,
            doing="--abort",
            forward=False,
        )

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
