"""Database leases over Django's connections, and leased node ids from Django settings.

``"fields": {"worker": {"lease": "redis", "url": "redis://…", "name": "orders", "ttl": 10}}``
or ``{"lease": "database", "database": "default", "name": "orders", "ttl": 10}`` (the
table comes with the ``uid_fields`` app's migration).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import connections

from ..leases import DatabaseLease, RedisLease
from ..leases.database import dialect_of

__all__ = ["database_lease", "lease_from_settings"]


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


def lease_from_settings(field: str, config: Mapping[str, Any]) -> RedisLease | DatabaseLease:
    """The lease a settings entry describes; ValueError says what is wrong with it."""
    kind = config.get("lease")
    name = config.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"the {field!r} lease needs a 'name' (the id space shared by the processes "
            f"that must not collide), got {dict(config)!r}"
        )
    ttl = float(config.get("ttl", 10))
    margin = config.get("margin")
    margin = None if margin is None else float(margin)
    if kind == "redis":
        _check_keys(field, config, _REDIS_KEYS)
        url = config.get("url")
        if not isinstance(url, str):
            raise ValueError(f"the {field!r} Redis lease needs a 'url' (redis://host:port/db)")
        return RedisLease(
            url, name, ttl, margin=margin, prefix=str(config.get("prefix", "uid_fields:lease:"))
        )
    if kind == "database":
        _check_keys(field, config, _DATABASE_KEYS)
        return database_lease(
            name, ttl, database=str(config.get("database", "default")), margin=margin
        )
    raise ValueError(f"the {field!r} lease must be 'redis' or 'database', got {kind!r}")


def _check_keys(field: str, config: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(config) - allowed
    if unknown:
        raise ValueError(
            f"unknown keys {sorted(unknown)} in the {field!r} {config.get('lease')} lease; "
            f"allowed: {sorted(allowed)}"
        )
