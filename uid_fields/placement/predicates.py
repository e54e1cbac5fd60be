"""SQL predicates that select the rows of logical shards by their id column alone.

For routes that are arithmetic on the id (Instagram's shard bits or any node field, the
server digits of a decimal id) the database can tell a row's logical shard by itself, so
an audit counts, a shard move copies and a cleanup deletes without reading ids into
Python. The other routes (the mixed modulo of snowflakes, locality blocks, uniqid digits)
give None here, and their callers check ids in Python, a batch at a time.

The SQL uses subtraction, modulo and exact division only (no shifts, no FLOOR), which
PostgreSQL, MySQL/MariaDB and SQLite evaluate alike on BIGINTs.
"""

from __future__ import annotations

from .shards import ByDecimalServer, ByField, Route

__all__ = ["logical_range_sql", "logical_shard_sql"]


def logical_shard_sql(route: Route, column: str) -> str | None:
    """An SQL expression for the logical shard of the id in ``column`` (already quoted),
    or None when ``route`` is not arithmetic on the id."""
    if isinstance(route, ByField):
        unit = 1 << route.layout.field_shift(route.field)
        size = 1 << route.layout.field_bits(route.field)
        return f"((({column} - {column} % {unit}) / {unit}) % {size})"
    if isinstance(route, ByDecimalServer):
        return f"({column} % {route.layout.server_scale})"
    return None


def logical_range_sql(route: Route, column: str, low: int, high: int) -> str | None:
    """True for ids in logical shards ``low`` (included) to ``high`` (excluded); None
    when ``route`` is not arithmetic on the id."""
    logical = logical_shard_sql(route, column)
    if logical is None:
        return None
    return f"({logical} >= {low} AND {logical} < {high})"
