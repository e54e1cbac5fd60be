"""What a move may delete on its target, and what to do when the new map came early.

Before the switch the target holds copies, so calling a move off deletes them: the
source still has every row. That holds only while nothing but the mover writes to the
target. When the new map reaches some processes before ``--switch`` (half the fleet
deployed early), those processes write the range on the target: rows the source never
had, and new versions of copied rows. Deleting the target's range then deletes the only
copy of those writes (issue 35: 343 rows and 353 updates).

So before a mover deletes the target's rows of the range, the core looks
(``target_writes``): the range is walked on both sides in key order (the walk every step
uses, ``MoveWalk._pairs``), and per table it counts rows only the target has, rows whose
contents differ from the source's, and rows only the source has. The first two are
writes made under a new map (once the target has caught up with the source, nothing
else makes them); while any exists, ``refusal`` says why nothing is deleted, names the
tables and counts, and gives the two recoveries: switch forward (deploy the new map
everywhere; the switch fences the source, lets the target catch up with it and keeps
the target's own writes), or go back (deploy the old map everywhere and copy those rows
back to the source first). Rows only the source has are rows deleted on the target
under the new map, or not yet copied: deleting the target's copies loses nothing of
them, so they are counted, never a reason to refuse.

``early_deploy`` is what a run under the new map says before the switch: the map was
deployed early, and the same two ways on.

Both movers and both adapters call these; none decides on its own what is safe to delete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ids.layouts import IntLayout
from .move_tables import Row
from .move_walk import MoveWalk

__all__ = [
    "TargetWrites",
    "TargetWritten",
    "copy_back",
    "early_deploy",
    "never_copied",
    "refusal",
    "source_copies",
    "target_writes",
]

#: At most this many keys of each kind are kept to be named in a message.
SHOWN = 5


class TargetWritten(ValueError):
    """A step would delete rows on the target that the mover never copied there: rows
    written on the target under a new map deployed early. Nothing was deleted."""


def never_copied(
    keys: list[Any], layout: IntLayout | None, passed_ms: int | None, margin_ms: int
) -> list[Any]:
    """Of target rows the source lacks (``keys``), those the mover cannot have copied:
    made more than ``margin_ms`` (the writers' clock skew) after the last copy and
    catch-up ended (``passed_ms``), since every row a pass copied was made before the
    pass ended. The portable mover's copy makes the target equal to the source before
    the switch; such a row is not a copy the source deleted since, but a write made on
    the target, and deleting it deletes the only copy. Keys without time (no layout),
    or no pass on record: none can be told apart, so none are returned."""
    if layout is None or passed_ms is None:
        return []
    return [key for key in keys if layout.timestamp_ms_of(key) > passed_ms + margin_ms]


@dataclass
class TargetWrites:
    """What the target of one table holds that the source does not, in the range."""

    table: str
    #: Rows only the target has (inserted there under a new map): their keys, the
    #: first ``SHOWN`` kept.
    only_on_target: int = 0
    #: Rows on both sides whose contents differ (updated on the target, or not yet
    #: caught up with the source).
    changed_on_target: int = 0
    #: Rows only the source has (deleted on the target, or not copied yet).
    only_on_source: int = 0
    keys: list[Any] = field(default_factory=list)

    @property
    def written(self) -> bool:
        """Whether deleting the target's rows would delete writes found nowhere else."""
        return bool(self.only_on_target or self.changed_on_target)

    def __str__(self) -> str:
        shown = f" (keys {', '.join(map(str, self.keys))}, ...)" if self.keys else ""
        return (
            f"{self.table}: {self.only_on_target} rows only on the target, "
            f"{self.changed_on_target} rows changed there{shown}"
        )


def target_writes(walk: MoveWalk) -> list[TargetWrites]:
    """Per table, what the target holds of the range that the source does not.

    Exact only while neither side changes (the source fenced and caught up with, the
    target no longer written to); otherwise a write in flight can be counted or missed,
    which is why callers fence first where they can, and count again before deleting.
    """
    found = []
    for table in walk.tables:
        writes = TargetWrites(table.store.label)
        for source, target, _key, _walked in walk._pairs(table, None):
            ours = {row[0]: row for row in source}
            theirs = {row[0] for row in target}
            for row in target:
                mine = ours.get(row[0])
                if mine is None:
                    writes.only_on_target += 1
                elif mine != row:
                    writes.changed_on_target += 1
                else:
                    continue
                if len(writes.keys) < SHOWN:
                    writes.keys.append(row[0])
            writes.only_on_source += sum(1 for key in ours if key not in theirs)
        found.append(writes)
    return found


def source_copies(
    source: list[Row], target: list[Row], *, switched: bool
) -> tuple[list[Any], list[Any], list[Any]]:
    """Which of a batch of source rows a cleanup may delete: ``(copies, absent,
    changed)`` by key. ``copies`` are on the target; without a switch on record
    (``switched`` False: the new map deployed before it, or a lost state file) only as
    they are on the source, since nothing then says the target's other version is the
    newer one. ``absent``: not on the target; ``changed``: there in another version
    (kept without a switch). After a switch the target owns the range, and its version
    is the row's, whatever it is."""
    theirs = {row[0]: row for row in target}
    absent = [row[0] for row in source if row[0] not in theirs]
    if switched:
        return [row[0] for row in source if row[0] in theirs], absent, []
    copies = [row[0] for row in source if theirs.get(row[0]) == row]
    changed = [row[0] for row in source if row[0] in theirs and theirs[row[0]] != row]
    return copies, absent, changed


def copy_back(walk: MoveWalk) -> list[TargetWrites]:
    """Copy what only the target holds back to the source, parents first: rows only the
    target has are inserted there, rows changed on the target written over the source's.
    Afterwards the target holds nothing the source lacks, and its copies can go.

    For going back to the old map: run it once no process writes to the target (the old
    map deployed everywhere) and after the target caught up with the source (else a
    source update not yet replicated would be overwritten by the target's older
    version). Rows only the source has are left as they are. Returns what was copied.
    """
    copied = []
    for table in walk.tables:
        store, writes = table.store, TargetWrites(table.store.label)
        for source, target, _key, _walked in walk._pairs(table, None):
            ours = {row[0]: row for row in source}
            missing = [row for row in target if row[0] not in ours]
            changed = [row for row in target if row[0] in ours and ours[row[0]] != row]
            if missing or changed:
                with store.writing(walk.source):
                    if missing:
                        store.insert(walk.source, missing)
                    if changed:
                        store.update(walk.source, changed)
            writes.only_on_target += len(missing)
            writes.changed_on_target += len(changed)
        copied.append(writes)
    return copied


def _ways_on(source: str, target: str, *, forward: bool) -> str:
    back = (
        f"deploy the old map to every process (nothing writes to {target} then), copy "
        f"those rows back to {source} first (move-shards --abort --copy-back does it: the "
        f"rows only on {target} are inserted on {source} and the changed ones written "
        f"over {source}'s), and the abort deletes {target}'s copies"
    )
    if not forward:
        return (
            f"Go back: {back}. (The portable mover cannot switch forward, and for a row "
            f"that differs it cannot tell whether {target} or {source} changed it since "
            "the last copy: --copy-back keeps the target's version; the keys are above.)"
        )
    return (
        "Either switch forward: deploy the new map to every process, then run "
        f"move-shards --switch under it (it fences {source}, lets {target} catch up with "
        f"every write {source} took, keeps {target}'s own writes and switches), then "
        f"--cleanup. Or go back: {back}"
    )


def refusal(
    writes: list[TargetWrites], *, source: str, target: str, doing: str, forward: bool = True
) -> str | None:
    """Why ``doing`` (deleting the target's rows of the range) is refused, or None when
    the target holds nothing the source lacks. ``forward``: whether the mover can
    switch forward (logical replication can; the portable mover cannot)."""
    written = [w for w in writes if w.written]
    if not written:
        return None
    rows = sum(w.only_on_target for w in written)
    changed = sum(w.changed_on_target for w in written)
    return (
        f"{doing} refused: {target} was written to under a new map ({rows} rows and "
        f"{changed} updates that {source} does not have; "
        f"{'; '.join(str(w) for w in written)}). Deleting {target}'s rows of the range "
        f"would delete the only copy of them; nothing was deleted. "
        f"{_ways_on(source, target, forward=forward)}."
    )


def early_deploy(walk: MoveWalk, *, switched: bool, forward: bool = True) -> str | None:
    """What a run under the new map says before the switch: None once switched (the
    deploy is then on time), or while the map still gives the range to the source."""
    if switched or not walk.deployed:
        return None
    ways = _ways_on(walk.source, walk.target, forward=forward)
    return (
        f"the new map was deployed before --switch: it gives logical shards "
        f"{walk._span()} to {walk.target}, while {walk.source} still takes writes of the "
        f"range from processes on the old map. {ways}."
    )
