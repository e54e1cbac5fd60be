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

from .move_walk import MoveWalk

__all__ = ["TargetWrites", "copy_back", "early_deploy", "refusal", "target_writes"]

#: At most this many keys of each kind are kept to be named in a message.
SHOWN = 5


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


def _ways_on(source: str, target: str) -> str:
    return (
        "Either switch forward: deploy the new map to every process, then run "
        f"move-shards --switch under it (it fences {source}, lets {target} catch up with "
        f"every write {source} took, keeps {target}'s own writes and switches), then "
        f"--cleanup. Or go back: deploy the old map to every process (nothing writes to "
        f"{target} then), copy those rows back to {source} first (--abort --copy-back "
        "does it: the rows only on the target are inserted on the source and the changed "
        "ones written over the source's), then --abort"
    )


def refusal(writes: list[TargetWrites], *, source: str, target: str, doing: str) -> str | None:
    """Why ``doing`` (deleting the target's rows of the range) is refused, or None when
    the target holds nothing the source lacks."""
    written = [w for w in writes if w.written]
    if not written:
        return None
    rows = sum(w.only_on_target for w in written)
    changed = sum(w.changed_on_target for w in written)
    return (
        f"{doing} refused: {target} was written to under a new map ({rows} rows and "
        f"{changed} updates that {source} does not have; "
        f"{'; '.join(str(w) for w in written)}). Deleting {target}'s rows of the range "
        f"would delete the only copy of them; nothing was deleted. {_ways_on(source, target)}."
    )


def early_deploy(walk: MoveWalk, *, switched: bool) -> str | None:
    """What a run under the new map says before the switch: None once switched (the
    deploy is then on time), or while the map still gives the range to the source."""
    if switched or not walk.deployed:
        return None
    return (
        f"the new map was deployed before --switch: it gives logical shards "
        f"{walk._span()} to {walk.target}, while {walk.source} still takes writes of the "
        f"range from processes on the old map. {_ways_on(walk.source, walk.target)}."
    )
