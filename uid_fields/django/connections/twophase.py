"""Two-phase commit over Django databases: the connections, handed to the core coordinator.

``sharded_atomic(..., two_phase=True)`` and ``bulk_create(..., two_phase=True)`` come
here. Each database's block runs in Django's ``transaction.atomic``; at its end the core
coordinator (``uid_fields.twophase``) prepares each transaction through that connection,
then decides and finishes through a second connection per database in autocommit mode.
The atomic blocks then close on transactions the server has already ended, and their
``on_commit`` callbacks run after the real commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from django.db import NotSupportedError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.transaction import TransactionManagementError

from ...ops import twophase
from ...ops.twophase import Coordinator, Resolution

__all__ = ["resolve_prepared", "two_phase_atomic"]


def _check(alias: str) -> BaseDatabaseWrapper:
    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise NotSupportedError(
            f"two-phase commit needs PostgreSQL; database {alias!r} is {connection.vendor}. "
            "Use sharded_atomic() without two_phase=True there (its commits run one after "
            "another)."
        )
    if connection.in_atomic_block:
        raise TransactionManagementError(
            f"two_phase=True must open the outermost transaction on {alias!r}: PREPARE "
            "TRANSACTION ends the whole transaction, so it cannot run inside an atomic "
            "block that is already open there"
        )
    return connection


class _SideConnections:
    """A second connection per database, in autocommit mode, opened on first use."""

    def __init__(self) -> None:
        self._open: dict[str, BaseDatabaseWrapper] = {}

    def cursor(self, alias: str) -> Any:
        connection = self._open.get(alias)
        if connection is None:
            connection = self._open[alias] = connections.create_connection(alias)
        return connection.cursor()

    def discard(self, alias: str) -> None:
        """Drop ``alias``'s connection (it failed): the next cursor connects afresh."""
        connection = self._open.pop(alias, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for connection in self._open.values():
            connection.close()


@contextmanager
def two_phase_atomic(
    *aliases: str, on_stage: Callable[[str], None] | None = None
) -> Iterator[None]:
    """``transaction.atomic`` on each PostgreSQL database in ``aliases``, committed
    all-or-nothing by two-phase commit when the block ends."""
    names = list(dict.fromkeys(aliases))
    for alias in names:
        _check(alias)
    coordinator = Coordinator(names, on_stage=on_stage)
    side = _SideConnections()
    try:
        with side.cursor(coordinator.decision) as cursor:
            twophase.ensure_table(cursor)
        with ExitStack() as stack:
            for alias in names:
                stack.enter_context(transaction.atomic(using=alias))
            yield
            coordinator.commit(lambda alias: connections[alias].cursor(), side.cursor, side.discard)
    finally:
        side.close()


def resolve_prepared(
    aliases: Iterable[str] | None = None, *, older_than_s: float = 60.0
) -> Resolution:
    """Finish the two-phase transactions a killed process left prepared.

    ``aliases``: the databases to look in (every PostgreSQL database in ``DATABASES`` by
    default). Decided ones are committed; undecided ones prepared more than
    ``older_than_s`` ago are rolled back.
    """
    if aliases is None:
        aliases = [a for a in connections if connections[a].vendor == "postgresql"]
    side = _SideConnections()
    try:
        cursors = {alias: side.cursor(alias) for alias in aliases}
        return twophase.resolve(cursors, older_than_s=older_than_s)
    finally:
        side.close()
