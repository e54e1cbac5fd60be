"""Unique sets of rows on shards: which ones the databases enforce, which databases a
uniqueness check must read.

A unique index holds on the one database it lives on. Two rows that collide on a unique
set live on one database, where that index sees both, when the set includes what places
a row: its id (an id names one database), its shard key (one key, one database) or the
parent key a row follows. Any other set can hold each value once per database: only a
check that reads every database the rows can live on finds the other copy, and even it
cannot stop two concurrent writes (the docs' key table on one database can).

The adapters describe a model's unique sets and the fields that place its rows; the
rule, and the reading of a lookup as "these exact values of one whole set", live here
so both ORMs answer alike.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DATE_PARTS",
    "UniqueSet",
    "databases_to_check",
    "enforced_by_databases",
    "named_unique_set",
]

#: Lookups by which a ``unique_for_date`` (``_month``, ``_year``) check names its date.
DATE_PARTS = frozenset({"exact", "year", "month", "day"})


@dataclass(frozen=True)
class UniqueSet:
    """Fields whose values are unique together, as a model declares them.

    ``fields`` are field names; ``date_field`` is the date a ``unique_for_date`` value
    is unique within (a lookup names it by its parts: year, month, day); ``label`` says
    where it was declared (``unique=True``, ``unique_together``, a constraint's name).
    """

    fields: tuple[str, ...]
    label: str = "unique"
    date_field: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Every field the set covers, its date field last."""
        return self.fields if self.date_field is None else (*self.fields, self.date_field)

    def __str__(self) -> str:
        return f"({', '.join(self.names)})"


def enforced_by_databases(
    unique: UniqueSet | Collection[str], placing: Collection[str], databases: int
) -> bool:
    """Whether the databases' own unique indexes hold ``unique`` over every row.

    True when one database holds every row, or when the set includes a field in
    ``placing`` (the id, the shard key, a followed parent's key): rows that could
    collide then share a database, and its index sees both.
    """
    names = unique.names if isinstance(unique, UniqueSet) else tuple(unique)
    return databases <= 1 or any(name in placing for name in names)


def databases_to_check(
    unique: UniqueSet | Collection[str],
    placing: Collection[str],
    databases: Sequence[str],
    key_databases: Sequence[str] | None,
) -> tuple[str, ...]:
    """Every database a row colliding with a row's values can be on.

    ``databases`` are every database of the map, ``key_databases`` the ones the row's
    own placing values name (None when unknown, a key not set yet). A set the databases
    enforce is read on the row's databases; any other on all of them.
    """
    if key_databases is not None and enforced_by_databases(unique, placing, len(databases)):
        return tuple(key_databases)
    return tuple(databases)


def named_unique_set(
    lookups: Mapping[str, Collection[str]], sets: Iterable[UniqueSet]
) -> UniqueSet | None:
    """The unique set a filter names whole, if any: at most one row per database matches.

    ``lookups`` maps each field name a filter constrains to the lookups it uses on it
    (``"exact"`` for ``slug=`` and ``slug__exact=``). A set is named when each of its
    fields is matched exactly, and its date field (``unique_for_date``) by its parts; a
    set of one field also by a list of values (``slug__in=``: one row per value and
    database at most).
    """
    for unique in sets:
        matches = {"exact", "in"} if len(unique.fields) == 1 else {"exact"}
        exact = all(matches & set(lookups.get(name, ())) for name in unique.fields)
        dated = unique.date_field is None or bool(
            set(lookups.get(unique.date_field, ())) & DATE_PARTS
        )
        if exact and dated:
            return unique
    return None
