"""The tables a shard move walks, as the ORM adapters hand them in.

A move knows no ORM: each adapter wraps a table as a ``RowStore`` (read a batch of rows
ordered by primary key, count, write a batch in a transaction) and names how its rows are
placed in a ``MovedTable``. This module is that contract, and the row digest the verify and
the switch's fingerprint sum. It sits at the bottom of the move's modules (``move_walk``,
``move_cleanup`` and ``moves`` import it, it imports none of them), so the adapters and
every step share one definition of a row and of its checksum.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..ids.layouts import IntLayout
from ..placement import Placement
from .fences import FenceRunner

__all__ = ["MovedTable", "Row", "RowStore", "ShardSums", "row_digest"]

Row = tuple[Any, ...]
#: Per logical shard: ``[rows, checksum]`` of one side of a table.
ShardSums = dict[int, list[int]]


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


def row_digest(row: Row) -> int:
    """A row's 64-bit checksum term: the sums of a logical shard add these up modulo 2**64,
    so two sides compare without their rows being sorted alike."""
    return int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "big")
