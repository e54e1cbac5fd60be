"""The resumable part of a shard move: its state file, and what it belongs to.

``ShardMove`` (``uid_fields.ops.moves``) keeps its position (cursors, the time its copy
began), its switch (the source's fingerprint behind the fence) and its cleanup's rules in
a JSON file between runs, so a stopped or killed run resumes. The default name is made
of the move's aliases, which can mean other databases another day; the file therefore
records the databases' identities (``uid_fields.sql.identity``), the map and the tables,
and a mismatch is refused rather than resumed.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import MoveStateMismatch
from ..sql.identity import identity_query
from .fences import FenceRunner

__all__ = ["MoveState", "MoveStateMismatch", "database_identity"]


class MoveState:
    """The resumable part of a move, kept in a JSON file between runs.

    The file is named after the move's aliases (``.uid_fields-move-<map>-<source>-...``),
    and the same names can mean other databases another day. So it records what it
    belongs to (``belongs``: the move, the map, each database's identity, the tables
    and their ranges, see ``uid_fields.sql.identity``), and a file that belongs to
    something else is refused (``MoveStateMismatch``), as is a file whose move is over
    (``finished``): its cursors and start time would silently skip rows. It is written
    atomically (a temporary file, flushed to disk, then renamed over), so a kill at any
    point leaves the previous state or the new one, never half of one.
    """

    def __init__(
        self, path: str | Path | None, move: str, belongs: dict[str, Any] | None = None
    ) -> None:
        self.path = None if path is None else Path(path)
        self.move = move
        self.belongs = belongs
        self.started_ms: int | None = None
        self.caught_up_ms: int | None = None
        #: When the last copy and catch-up ended: a row the mover copied was made
        #: before, so a target row made later was written there (``move_recovery``).
        self.passed_ms: int | None = None
        self.cursors: dict[str, Any] = {}
        self.done: set[str] = set()
        #: Whether ``switch()`` ended with an exact copy behind the fence.
        self.switched = False
        #: The source's range at the switch, per table: ``[rows, checksum]``. The fence
        #: keeps the source as it was, so a later equal fingerprint proves that every
        #: source row was on the target at the switch (the ids present then).
        self.fingerprints: dict[str, list[int]] = {}
        #: The tables whose fingerprint matched when ``cleanup()`` began (None: not
        #: begun): a resumed cleanup trusts them while inserts and updates stay fenced.
        self.cleaning: list[str] | None = None
        #: When ``cleanup()`` finished the move (nothing kept); None until then.
        self.finished_ms: int | None = None
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _refuse(self, why: str) -> MoveStateMismatch:
        return MoveStateMismatch(
            f"{self.path} {why}. Nothing was done. If that move is over or abandoned, "
            "delete the file (or give --state another file) and this move starts from "
            "the beginning; to resume that move, run it from where it was started"
        )

    def _load(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
        except ValueError:
            raise self._refuse("is not a move's state (not JSON)") from None
        if data.get("move") != self.move:
            raise self._refuse(
                f"holds the state of another move ({data.get('move')!r}, not {self.move!r})"
            )
        if self.belongs is not None:
            theirs = data.get("belongs")
            if theirs is None:
                raise self._refuse("records no databases (an older version wrote it)")
            differ = sorted(
                k
                for k in self.belongs.keys() | theirs.keys()
                if self.belongs.get(k) != theirs.get(k)
            )
            if differ:
                said = "; ".join(
                    f"{k}: {theirs.get(k)!r} then, {self.belongs.get(k)!r} now" for k in differ
                )
                started = data.get("started_ms")
                since = "" if started is None else f" begun at {_when(started)}"
                raise self._refuse(f"holds the state of another move{since} ({said})")
        self.started_ms = data.get("started_ms")
        self.caught_up_ms = data.get("caught_up_ms")
        self.passed_ms = data.get("passed_ms")
        self.cursors = {k: _decode_key(v) for k, v in data.get("cursors", {}).items()}
        self.done = set(data.get("done", []))
        self.switched = bool(data.get("switched", False))
        self.fingerprints = data.get("fingerprints") or {}
        self.cleaning = data.get("cleaning")
        self.finished_ms = data.get("finished_ms")

    def refuse_if_finished(self) -> None:
        """A finished move's file may only clean up again (which finds nothing): a
        copy or a switch with it would start a new move from the old one's state."""
        if self.finished_ms is not None:
            raise self._refuse(f"holds a move that finished at {_when(self.finished_ms)}")

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "move": self.move,
            "belongs": self.belongs,
            "started_ms": self.started_ms,
            "caught_up_ms": self.caught_up_ms,
            "passed_ms": self.passed_ms,
            "cursors": {k: _encode_key(v) for k, v in self.cursors.items()},
            "done": sorted(self.done),
            "switched": self.switched,
            "fingerprints": self.fingerprints,
            "cleaning": self.cleaning,
            "finished_ms": self.finished_ms,
        }
        partial = self.path.with_name(self.path.name + ".partial")
        with partial.open("w") as out:
            out.write(json.dumps(data, indent=1))
            out.flush()
            os.fsync(out.fileno())
        partial.replace(self.path)  # atomic: a kill never leaves half a state


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def database_identity(store: FenceRunner, database: str) -> dict[str, Any]:
    """Who ``database`` is (``uid_fields.sql.identity``), as the state file keeps it."""
    vendor = store.vendor(database)
    rows = store.run(database, [identity_query(vendor, store.table_name)])
    values = [None if v is None else str(v) for v in (rows[0] if rows else ())]
    if vendor == "sqlite":
        file = values[0] if values else None
        if not file:
            return {"vendor": vendor, "file": ":memory:"}
        resolved = Path(file).resolve()
        stat = resolved.stat()
        return {
            "vendor": vendor,
            "file": str(resolved),
            "device": stat.st_dev,
            "inode": stat.st_ino,
        }
    return {"vendor": vendor, "values": values}


def _encode_key(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return {"uuid": str(value)}
    if value is None or isinstance(value, (int, str)):
        return value
    raise TypeError(f"cannot keep a position at a key of type {type(value).__name__}")


def _decode_key(value: Any) -> Any:
    return uuid.UUID(value["uuid"]) if isinstance(value, dict) else value
