"""Two-phase commit over SQLAlchemy engines: connections in, the core coordinator decides.

``sharded_session(..., two_phase=True)`` and ``bulk_insert(engines, ..., two_phase=True)``
come here. The shards' transactions stay open on their connections; the core coordinator
(``uid_fields.twophase``) prepares each through its own connection, then decides and
finishes through a second connection per engine in autocommit mode. SQLAlchemy's own
commit of each connection then finds a transaction the server has already ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import ArgumentError

from ..ops import twophase
from ..ops.twophase import Coordinator, Resolution

__all__ = ["check_postgresql", "commit_two_phase", "resolve_prepared"]


def check_postgresql(engines: Mapping[str, Engine]) -> None:
    """Refuse two-phase commit over engines that are not PostgreSQL, naming them."""
    other = sorted(name for name, e in engines.items() if e.dialect.name != "postgresql")
    if other:
        raise ArgumentError(
            f"two-phase commit needs PostgreSQL; {', '.join(other)} "
            f"{'is' if len(other) == 1 else 'are'} not. Without two_phase=True the shards "
            "commit one after another once every shard succeeded."
        )
    for name in engines:
        twophase.check_name(name)


class _Cursor:
    """A DB-API-like cursor over a SQLAlchemy connection, so that errors arrive as
    SQLAlchemy's exceptions (``IntegrityError`` for a constraint checked at PREPARE)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._rows: Sequence[Sequence[Any]] = []

    def execute(self, sql: str, params: Any = None, /) -> None:
        result = self._connection.exec_driver_sql(sql, params)
        self._rows = [tuple(row) for row in result] if result.returns_rows else []

    def fetchall(self) -> Sequence[Sequence[Any]]:
        return self._rows


class _SideConnections:
    """One autocommit connection per engine, opened on first use, closed together."""

    def __init__(self, engines: Mapping[str, Engine]) -> None:
        self._engines = engines
        self._open: dict[str, Connection] = {}

    def cursor(self, name: str) -> Any:
        connection = self._open.get(name)
        if connection is None:
            connection = self._engines[name].connect()
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            self._open[name] = connection
        return _Cursor(connection)

    def discard(self, name: str) -> None:
        """Drop ``name``'s connection (it failed): the next cursor connects afresh."""
        connection = self._open.pop(name, None)
        if connection is not None:
            connection.invalidate()
            connection.close()

    def close(self) -> None:
        for connection in self._open.values():
            connection.close()


def commit_two_phase(
    connections: Mapping[str, Connection],
    engines: Mapping[str, Engine],
    *,
    on_stage: Callable[[str], None] | None = None,
) -> None:
    """Commit the open transactions of ``connections`` (shard name -> connection) together.

    Raises, with nothing committed, when a prepare fails; the connections' transactions
    must then be rolled back by the caller (as after any failed flush).
    """
    names = list(connections)
    coordinator = Coordinator(names, on_stage=on_stage)
    side = _SideConnections(engines)
    try:
        twophase.ensure_table(side.cursor(coordinator.decision))
        coordinator.commit(lambda name: _Cursor(connections[name]), side.cursor, side.discard)
    finally:
        side.close()


def resolve_prepared(engines: Mapping[str, Engine], *, older_than_s: float = 60.0) -> Resolution:
    """Finish the two-phase transactions a killed process left prepared on ``engines``.

    Give every engine of the deployment by the names its sessions use: a branch's
    decision lives on the first shard of its transaction. Decided ones are committed;
    undecided ones prepared more than ``older_than_s`` ago are rolled back.
    """
    check_postgresql(engines)
    side = _SideConnections(engines)
    try:
        return twophase.resolve({n: side.cursor(n) for n in engines}, older_than_s=older_than_s)
    finally:
        side.close()
