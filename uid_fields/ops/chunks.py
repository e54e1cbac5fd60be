"""A stream read in keyset chunks: what each next chunk asks for after the last row.

A server-side cursor streams one shard's rows with bounded memory, but behind a pooler in
transaction mode (PgBouncer) a cursor outside a transaction does not survive: Django
declares it ``WITH HOLD``, the transaction that declared it ends, and the next FETCH
is given another server connection, where the cursor does not exist. Reading the rows
in chunks instead (``ORDER BY key LIMIT chunk``, then the rows past the last one seen)
needs no state on the server between two queries, so any connection can answer each
chunk, and memory stays at one chunk per shard.

Each chunk is a query of its own, so the order must be total: the query's terms and
then the primary key, and "past the last row" is the usual row comparison spelt for
SQL's NULLs: for terms ``a, b`` and the last row ``(x, y)``, ``a beyond x OR (a = x AND b
beyond y)``, where "beyond" follows each term's direction and where its NULLs land.
The database compares under the column's collation, the same one its ORDER BY uses, so
a chunk starts exactly where the last one ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .merge import NullsOrder

__all__ = ["ChunkTerm", "Comparison", "rows_beyond"]

Operator = Literal["=", ">", "<", "is null", "is not null"]


@dataclass(frozen=True)
class ChunkTerm:
    """One term of a chunked stream's total order: an attribute, its direction, and
    where its NULLs land in the output (the explicit position or the backend's)."""

    name: str
    descending: bool
    nulls: NullsOrder


@dataclass(frozen=True)
class Comparison:
    """``name op value`` (``value`` unused for the NULL tests)."""

    name: str
    op: Operator
    value: Any = None


def rows_beyond(terms: Sequence[ChunkTerm], last: Sequence[Any]) -> list[list[Comparison]]:
    """The rows after ``last`` (the values of ``terms`` in the last row read) in the
    order of ``terms``: an OR of ANDs of comparisons. An empty list means no row can
    follow (the last row was the end of every term's order). The last term must be
    unique and never NULL (the primary key), or rows equal on every term are lost."""
    if len(terms) != len(last):
        raise ValueError(f"{len(terms)} terms but {len(last)} values")
    alternatives: list[list[Comparison]] = []
    equal: list[Comparison] = []
    for term, value in zip(terms, last, strict=True):
        for beyond in _beyond(term, value):
            alternatives.append([*equal, beyond])
        equal.append(
            Comparison(term.name, "is null") if value is None else Comparison(term.name, "=", value)
        )
    return alternatives


def _beyond(term: ChunkTerm, value: Any) -> list[Comparison]:
    """The comparisons (an OR) of the values that come after ``value`` under ``term``."""
    if value is None:  # the NULLs: only values follow, and only when NULLs come first
        return [Comparison(term.name, "is not null")] if term.nulls == "first" else []
    after = [Comparison(term.name, "<" if term.descending else ">", value)]
    if term.nulls == "last":
        after.append(Comparison(term.name, "is null"))
    return after
