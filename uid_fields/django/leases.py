"""Database leases over Django's connections.

What a settings entry ``{"lease": "database", "database": "default", "name": "orders"}``
becomes (the core parses the entry; this gives it Django's connections). The table
comes with the ``uid_fields`` app's migration.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from ..ids.leases import DatabaseLease
from ..ids.leases.database import dialect_of

__all__ = ["database_lease"]


def database_lease(
    name: str,
    ttl: float = 10.0,
    *,
    database: str = "default",
    margin: float | None = None,
) -> DatabaseLease:
    """A lease over the ``uid_fields`` app's table in the Django database ``database``.

    It uses connections of its own (``get_new_connection``), so it neither joins nor
    disturbs the request's transaction.
    """

    def connect() -> Any:
        wrapper = connections[database]
        return wrapper.get_new_connection(wrapper.get_connection_params())

    return DatabaseLease(
        connect,
        name,
        ttl,
        margin=margin,
        dialect=dialect_of(connections[database].vendor),
        where=f"Django database {database!r}",
    )


_REDIS_KEYS = {"lease", "url", "name", "ttl", "margin", "prefix"}
_DATABASE_KEYS = {"lease", "database", "name", "ttl", "margin"}
