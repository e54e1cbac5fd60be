"""What a shard move reports: its progress during a pass, and what each pass did.

``ShardMove`` (``uid_fields.ops.moves``) hands a ``Progress`` to its ``on_progress``
callback about twice a second, and returns a report per table and pass. Both are also
logged on ``uid_fields.moves`` (docs/logging.md): each pass's report when it ends (INFO;
WARNING for a verify that found differences and a cleanup that kept rows), and the
progress of a long pass every ``LOG_EVERY_S`` seconds (INFO).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CleanupReport", "MoveReport", "Progress", "Ticker", "VerifyReport"]

log = logging.getLogger("uid_fields.moves")

#: A pass that runs longer than this logs its progress this often (seconds).
LOG_EVERY_S = 10.0


@dataclass
class Progress:
    """Where a pass over one table stands (``str()`` draws a bar)."""

    table: str
    phase: str
    done: int
    total: int | None
    elapsed_s: float

    @property
    def rate(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        if self.total is None or not self.rate:
            return None
        return max(self.total - self.done, 0) / self.rate

    def __str__(self) -> str:
        width = 24
        if self.total:
            filled = min(width, width * self.done // self.total)
            bar = "#" * filled + "." * (width - filled)
            of = f"{self.done}/{self.total}"
        else:
            bar, of = "~" * width, str(self.done)
        eta = "" if self.eta_s is None else f", ETA {self.eta_s:.0f} s"
        return f"{self.phase:<8} {self.table:<24} [{bar}] {of} rows, {self.rate:,.0f} rows/s{eta}"


@dataclass
class MoveReport:
    """What a copy or catch-up pass changed on the target for one table."""

    table: str
    phase: str
    read: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    #: Rows the target refused for now (a parent written after its table was walked):
    #: the next pass, or the repair of ``verify()``, copies them.
    skipped: int = 0

    def __str__(self) -> str:
        skipped = f", {self.skipped} left for the next pass" if self.skipped else ""
        return (
            f"{self.phase:<8} {self.table}: {self.read} rows read, {self.inserted} inserted, "
            f"{self.updated} updated, {self.deleted} deleted on the target{skipped}"
        )


@dataclass
class VerifyReport:
    """Row counts and checksums per logical shard, compared on both sides."""

    table: str
    source_rows: int = 0
    target_rows: int = 0
    logical_shards: int = 0
    differing: list[int] = field(default_factory=list)
    #: Source rows the target lacks.
    missing: int = 0
    #: Checked after the switch: only that every source row reached the target.
    deployed: bool = False
    #: Source rows the target lacks because the application deleted them there after
    #: the switch (the source is as the switch left it): fine, and not copied back.
    deleted_since: int = 0

    @property
    def ok(self) -> bool:
        return not self.differing

    def __str__(self) -> str:
        if self.ok:
            state = "every row on the target" if self.deployed else "counts and checksums match"
            if self.deleted_since:
                state += f" or deleted there since the switch ({self.deleted_since})"
        elif self.deployed:
            state = (
                f"{self.missing} rows of the source NOT on the target (never copied, or "
                "deleted there since: the source changed after the switch, or there was "
                f"no switch, so nothing tells), logical shards {self.differing[:10]}"
            )
        else:
            state = f"DIFFER in logical shards {self.differing[:10]}"
        return (
            f"verify   {self.table}: {self.source_rows} rows on the source, "
            f"{self.target_rows} on the target, {self.logical_shards} logical shards: {state}"
        )


@dataclass
class CleanupReport:
    """Rows of the moved range deleted from the source, and rows kept there; in a dry
    run, the rows that would be deleted and kept (nothing is)."""

    table: str
    deleted: int = 0
    #: Rows kept on the source: not on the target, and nothing tells that the
    #: application deleted them there (``referenced`` of them: a kept row refers to
    #: them, the database refused their delete).
    kept: int = 0
    referenced: int = 0
    samples: list[Any] = field(default_factory=list)
    dry_run: bool = False
    #: Of ``deleted``: rows the application deleted on the target after the switch.
    deleted_since: int = 0
    #: Of ``kept``: rows the target holds in another version, with no switch on record
    #: to say the target's is the newer one (``move_recovery.source_copies``).
    changed: int = 0

    def keep(self, key: Any, *, referenced: bool = False, changed: bool = False) -> None:
        self.kept += 1
        self.referenced += referenced
        self.changed += changed
        if len(self.samples) < 5:
            self.samples.append(key)

    def __str__(self) -> str:
        kept = ""
        if self.kept:
            shown = ", ".join(str(s) for s in self.samples)
            why = "not on the target"
            if self.changed:
                why += f", or another version there and no switch on record ({self.changed})"
            if self.referenced:
                why += f", or referred to by kept rows ({self.referenced})"
            kept = f"; {self.kept} kept: {why} (e.g. {shown})"
        since = ""
        if self.deleted_since:
            since = f" ({self.deleted_since} of them deleted on the target since the switch)"
        if self.dry_run:
            return (
                f"cleanup  {self.table}: {self.deleted} rows would be deleted from the source"
                f"{since}{kept.replace(' kept', ' would be kept')} (dry run: nothing deleted)"
            )
        return f"cleanup  {self.table}: {self.deleted} rows deleted from the source{since}{kept}"


class Ticker:
    """Reports a pass's progress about twice a second, and once at its end; logs it
    every ``LOG_EVERY_S`` seconds."""

    def __init__(
        self,
        on_progress: Callable[[Progress], None] | None,
        label: str,
        phase: str,
        total: int | None,
    ) -> None:
        self.on_progress, self.label, self.phase, self.total = on_progress, label, phase, total
        self.started = self.shown = self.logged = time.monotonic()
        self.done, self.shown_done = 0, -1

    def tick(self, count: int, *, final: bool = False) -> None:
        self.done += count
        now = time.monotonic()
        if not final and now - self.logged >= LOG_EVERY_S:
            self.logged = now
            log.info(
                "%s", Progress(self.label, self.phase, self.done, self.total, now - self.started)
            )
        if self.on_progress is None or self.done == self.shown_done:
            return
        if final or now - self.shown >= 0.5 or self.shown_done < 0:
            self.shown, self.shown_done = now, self.done
            progress = Progress(self.label, self.phase, self.done, self.total, now - self.started)
            self.on_progress(progress)

    def end(self) -> None:
        self.tick(0, final=True)
