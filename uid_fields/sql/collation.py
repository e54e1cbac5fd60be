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
from collections.abc import Iterable

__all__ = ["text_rank_param", "text_rank_sql"]

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
