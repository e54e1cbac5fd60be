"""Which databases a condition can match rows on, from the databases its parts name.

A routing part (``id = x``, ``id IN (...)``, ``shard_key = k``, ``shard_key IN (...)``)
names a set of databases; any other part names none that is known (``None``: its rows may
be anywhere). Both ORMs combine a condition's parts by these two rules, so the same
filter reads the same shards under Django and SQLAlchemy:

- AND: the databases every routing part allows (parts that route nothing only narrow
  further, on whatever databases are read); unknown when no part routes;
- OR: the union, known only when every branch routes (a branch that names no database
  may match rows anywhere).

An empty set is a condition no row can match (two keys of different databases ANDed,
an empty ``IN``): nothing needs to be read.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Databases", "all_of", "any_of"]

#: The databases a condition names; None when it names none that is known.
Databases = frozenset[str] | None


def all_of(parts: Iterable[Iterable[str] | None]) -> Databases:
    """The databases of an AND of ``parts``."""
    found: frozenset[str] | None = None
    for part in parts:
        if part is not None:
            names = frozenset(part)
            found = names if found is None else found & names
    return found


def any_of(parts: Iterable[Iterable[str] | None]) -> Databases:
    """The databases of an OR of ``parts`` (None as soon as one branch names none)."""
    found: frozenset[str] = frozenset()
    for part in parts:
        if part is None:
            return None
        found |= frozenset(part)
    return found
