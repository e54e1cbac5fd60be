"""The SQL that asks a database how its collation orders a set of strings.

A fan-out merges text keys in the database's order, not Python's: a case-insensitive
MariaDB collation puts ``"a"`` before ``"B"`` and treats ``"a"`` and ``"A"`` as equal, where
Python compares code points. One statement per merge sends the distinct strings as one
JSON parameter and reads back their ``DENSE_RANK()`` under the column's collation, so ties
stay ties and the merge repeats the database's own ORDER BY exactly.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Hashable, Iterable

__all__ = [
    "COLUMN_COLLATION_VENDORS",
    "forget_column_collations",
    "ranking_collation",
    "ranks_by_code_point",
    "text_rank_param",
    "text_rank_sql",
]

#: The backends whose string literals take the connection's collation, not the column's,
#: so a merge reads the column's own from ``information_schema``: Django names MariaDB's
#: backend ``"mysql"``, SQLAlchemy's dialect is ``"mysql"`` or ``"mariadb"``.
COLUMN_COLLATION_VENDORS = frozenset({"mysql", "mariadb"})

_column_collations: dict[Hashable, str | None] = {}
_column_collations_lock = threading.Lock()


def ranking_collation(
    vendor: str, declared: str | None, column: Hashable, read: Callable[[], str | None]
) -> str | None:
    """The collation a fan-out ranks a text key's strings under, for both adapters: the
    one the column declares; else, on MySQL and MariaDB (``COLUMN_COLLATION_VENDORS``),
    the column's own, ``read()`` from ``information_schema`` once per ``column`` (a key
    naming the database, table and column) per process; else None, the literal's
    default, which on PostgreSQL and SQLite is the column's."""
    if declared or vendor not in COLUMN_COLLATION_VENDORS:
        return declared or None
    with _column_collations_lock:
        if column in _column_collations:
            return _column_collations[column]
    found = read()
    with _column_collations_lock:
        _column_collations[column] = found
    return found


def ranks_by_code_point(vendor: str, collation: str | None) -> bool:
    """Whether text keys merge by code point, as Python compares them, with no query:
    SQLite's default BINARY collation does so."""
    return vendor == "sqlite" and not collation


def forget_column_collations() -> None:
    """Read each column's collation again (after a migration changed one; for tests)."""
    with _column_collations_lock:
        _column_collations.clear()


_COLLATION = re.compile(r"^[A-Za-z0-9_.@-]+$")


def _collate(vendor: str, collation: str | None) -> str:
    if not collation:
        return ""
    if not _COLLATION.match(collation):
        raise ValueError(f"collation {collation!r} is not a plain collation name")
    return f' COLLATE "{collation}"' if vendor == "postgresql" else f" COLLATE {collation}"


def text_rank_sql(vendor: str, collation: str | None, placeholder: str = "%s") -> str:
    """``SELECT value, rank`` for the strings of one JSON array parameter.

    ``collation`` is the column's (None: the column has the default one, which for a
    literal on PostgreSQL and SQLite is the same; MySQL and MariaDB callers pass the
    column's collation from ``information_schema``, since a literal takes the
    connection's). ``placeholder`` is the driver's spelling of the parameter.
    """
    order = _collate(vendor, collation)
    if vendor == "postgresql":
        return (
            f"SELECT v, DENSE_RANK() OVER (ORDER BY v{order}) "
            f"FROM json_array_elements_text(CAST({placeholder} AS json)) AS t(v)"
        )
    if vendor == "sqlite":
        return (
            f"SELECT value, DENSE_RANK() OVER (ORDER BY value{order}) FROM json_each({placeholder})"
        )
    if vendor in ("mysql", "mariadb"):
        return (
            f"SELECT v, DENSE_RANK() OVER (ORDER BY v{order}) FROM JSON_TABLE({placeholder}, "
            "'$[*]' COLUMNS (v LONGTEXT CHARACTER SET utf8mb4 PATH '$')) AS t"
        )
    raise ValueError(f"no collation query for the {vendor!r} backend")


def text_rank_param(values: Iterable[str]) -> str:
    """The JSON array parameter of ``text_rank_sql``: each distinct string once."""
    return json.dumps(sorted(set(values)), ensure_ascii=False)


#: The column's own collation on MySQL and MariaDB (a literal takes the connection's).
MYSQL_COLUMN_COLLATION = (
    "SELECT COLLATION_NAME FROM information_schema.COLUMNS "
    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {p} AND COLUMN_NAME = {p}"
)
