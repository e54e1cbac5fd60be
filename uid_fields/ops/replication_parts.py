"""The pieces a shard move by logical replication works with (``uid_fields.ops.replication``).

``PgDatabase`` is one side of the move as the mover needs it (a statement runner in
autocommit, and the libpq connection string the target's server uses to reach the
source), built by the adapters; ``PgTable`` a moved table with its range predicate
(the audit's); ``logical_refusal`` says why tables cannot move by replication; the
state file keeps what must survive the mover's death; ``ReplicationProgress`` is what
the progress lines show.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import ReplicationError, ReplicationUnavailable
from ..placement import Placement
from ..placement.predicates import logical_range_sql, logical_shard_sql
from ..sql import replication as sql
from .moves import ShardMove

__all__ = [
    "Fence",
    "PgDatabase",
    "PgTable",
    "ReplicationError",
    "ReplicationProgress",
    "ReplicationState",
    "ReplicationUnavailable",
    "Run",
    "logical_refusal",
    "pg_tables",
    "pooled_refusal",
]

#: Runs one SQL statement in autocommit and returns its rows (none for a command).
Run = Callable[[str], list[tuple[Any, ...]]]


class Fence(Protocol):
    """The move's write fence on the source (``uid_fields.ops.fences.MoveFence``)."""

    def install(self) -> None: ...

    def remove(self, events: Sequence[str] = ...) -> None: ...

    def holds(self, events: Sequence[str]) -> bool: ...


@dataclass(frozen=True)
class PgDatabase:
    """One side of the move: ``run`` executes one statement in autocommit and returns
    its rows (none for a command); ``conninfo`` is how the target's server reaches it
    (only the source's is used); ``port`` is the port the mover's connection was opened
    to (None: a socket or unknown), compared with the server's own to see a pooler."""

    name: str
    run: Run
    conninfo: str = ""
    close: Callable[[], None] = lambda: None
    port: int | None = None

    def one(self, statement: str) -> tuple[Any, ...] | None:
        rows = self.run(statement)
        return rows[0] if rows else None


@dataclass(frozen=True)
class PgTable:
    """A moved table: its label, name and routing column (unquoted), its placement and
    its moving logical shards ``low:high`` in its own logical space."""

    label: str
    name: str
    route_column: str
    placement: Placement
    low: int
    high: int

    @property
    def table_sql(self) -> str:
        return sql.quote_ident(self.name)

    @property
    def column_sql(self) -> str:
        return f"{self.table_sql}.{sql.quote_ident(self.route_column)}"

    @property
    def where(self) -> str:
        found = logical_range_sql(self.placement.route, self.column_sql, self.low, self.high)
        if found is None:
            raise ReplicationUnavailable(_no_predicate(self.label))
        return found

    @property
    def logical(self) -> str:
        found = logical_shard_sql(self.placement.route, self.column_sql)
        if found is None:
            raise ReplicationUnavailable(_no_predicate(self.label))
        return found


def pooled_refusal(database: PgDatabase) -> str | None:
    """Why ``database`` cannot take part in a move by replication because its connection
    goes through a pooler or proxy (None: it reaches the server itself). Behind PgBouncer
    in transaction mode the mover's session settings (replica identities, the fence's
    triggers) are not its session's, and the server that accepts a subscription's
    replication connection is the server itself, not the pooler. Seen as a server that
    listens on another port than the one the connection was opened to."""
    if database.port is None:
        return None
    found = database.one("SELECT inet_server_port()")
    server_port = found[0] if found else None
    if server_port is None or int(server_port) == int(database.port):
        return None
    return (
        f"{database.name} is reached through a pooler or proxy (the connection goes to port "
        f"{database.port}, the server listens on {server_port}): a move by logical "
        "replication needs a direct connection to each server, for its session settings "
        "and for the subscription's replication connection; point the move at the "
        "servers themselves (a database entry or engine without the pooler), or move "
        "with --method portable"
    )


def _no_predicate(label: str) -> str:
    return (
        f"{label}: its route is not arithmetic on the id (snowflakes' mixed modulo, "
        "locality UUIDs, uniqids), so no row filter can select its logical shards: "
        "move it with --method portable"
    )


def pg_tables(move: ShardMove) -> list[PgTable]:
    """The tables of a ``ShardMove`` as the replication mover sees them (each with its
    moving logical shards in its own logical space)."""
    found = []
    for table in move.tables:
        store = table.store
        low, high = move._ranges[store.label]
        found.append(
            PgTable(store.label, store.table_name, store.route_column, table.placement, low, high)
        )
    return found


def logical_refusal(tables: Sequence[PgTable]) -> str | None:
    """Why these tables cannot move by replication (None: they can)."""
    for table in tables:
        if logical_range_sql(table.placement.route, table.column_sql, 0, 1) is None:
            return _no_predicate(table.label)
    return None


@dataclass
class ReplicationProgress:
    """Where a replication move stands (``str()`` for a progress line)."""

    phase: str
    tables_ready: int
    tables: int
    copied: int
    total: int
    lag_bytes: int | None
    elapsed_s: float

    def __str__(self) -> str:
        lag = "?" if self.lag_bytes is None else f"{self.lag_bytes:,} bytes"
        return (
            f"{self.phase:<8} {self.tables_ready}/{self.tables} tables copied, "
            f"{self.copied}/{self.total} rows, lag {lag}, {self.elapsed_s:.0f} s"
        )


class ReplicationState:
    """What must survive the mover's death: the replica identities it changed (to
    restore them), whether the fence is on and the switch position."""

    def __init__(self, path: Path | None, name: str) -> None:
        self.path, self.name = path, name
        self.identities: dict[str, list[str | None]] = {}
        self.fenced = False
        self.switch_lsn: str | None = None
        self.switched = False
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            if data.get("name") != name:
                raise ValueError(
                    f"{path} holds the state of another move ({data.get('name')!r}): "
                    "give another --state file"
                )
            self.identities = data.get("identities", {})
            self.fenced = bool(data.get("fenced"))
            self.switch_lsn = data.get("switch_lsn")
            self.switched = bool(data.get("switched"))

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "name": self.name,
            "method": "logical",
            "identities": self.identities,
            "fenced": self.fenced,
            "switch_lsn": self.switch_lsn,
            "switched": self.switched,
        }
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(data, indent=1))
        partial.replace(self.path)

    def forget(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
