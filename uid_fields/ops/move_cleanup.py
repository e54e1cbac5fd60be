"""The last step of a shard move: deleting the source's copies once the target owns them.

Cleanup is where a move can lose data, so its rules live on their own: it is refused
until the maps give the range to the target; it deletes only source rows the target
holds, or rows the application deleted on the target after the switch when the switch's
fingerprint shows the source unchanged since; it goes children first and keeps (and
reports) a parent a kept child still refers to; and the fence opens for deletes only,
going for good once nothing is kept. ``ShardMove`` (``uid_fields.ops.moves``) inherits it.
"""

from __future__ import annotations

import logging
from typing import Any

from .move_recovery import source_copies
from .move_reports import CleanupReport
from .move_tables import RowStore
from .move_walk import MoveWalk

__all__ = ["MoveCleanup"]

log = logging.getLogger("uid_fields.moves")


class MoveCleanup(MoveWalk):
    """The cleanup of a move (see ``cleanup()``)."""

    def cleanup(self, *, dry_run: bool = False) -> list[CleanupReport]:
        """Delete the source's copies of the range, children first, and remove the fence.

        Deleted: the source rows the target holds (without a switch on record, only
        those it holds as they are: ``move_recovery.source_copies``), and, when the
        switch's fingerprint shows the source unchanged since (``_trusted``), the rows
        the application deleted on the target after the switch. Kept, and reported:
        rows not on the target that nothing tells from rows never copied, rows the
        target holds in another version with no switch on record, and rows a kept row
        still refers to (a parent whose child is kept: the database refuses its delete,
        which is then tried row by row instead of failing the batch). The fence opens for deletes
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
                doomed, absent, changed = source_copies(
                    source, target, switched=self.state.switched
                )
                for key in changed:  # the source's may be the only copy of that version
                    report.keep(key, changed=True)
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
