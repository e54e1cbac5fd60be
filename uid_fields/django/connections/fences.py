"""A shard move's fence, as Django code sees it: ``ShardMoveFencedError``.

While a move switches a range (``manage.py uid_fields move-shards --switch``), triggers
on the source database refuse writes of the range (``uid_fields.ops.fences``). The
driver reports that as a database error of its own kind (PostgreSQL SQLSTATE ``UF001``,
MariaDB's SIGNAL, SQLite's constraint error); this module wraps every connection's
execution (``connection.execute_wrappers``, installed on ``connection_created``) and
raises ``ShardMoveFencedError`` from it instead, on every path: ``save()``,
``delete()``, ``QuerySet.update()``, ``bulk_create``/``bulk_update``, raw cursors.
It is not an ``IntegrityError``, so ``get_or_create`` does not mistake it for a race.
Only the connections of shard databases (every alias a shard map names, incoming ones
too: a move's source) get the wrapper; ``default`` and other databases keep Django's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.signals import setting_changed
from django.db import DatabaseError, connections
from django.db.backends.signals import connection_created

from ...errors import ConfigurationError
from ...sql.fences import refusal
from ..conf import shard_databases

__all__ = ["FENCE_TRANSLATOR", "install"]


def _translate(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    try:
        return execute(sql, params, many, context)
    except DatabaseError as exc:
        fenced = refusal(exc, context["connection"].alias)
        if fenced is None:
            raise
        raise fenced from exc


#: The wrapper itself, for code that tells uid_fields' own wrappers from a user's (a query
#: counter, a logger): it translates refused writes and observes nothing.
FENCE_TRANSLATOR = _translate


def _shard_aliases() -> set[str]:
    try:
        return shard_databases()
    except (ConfigurationError, TypeError, ValueError, AttributeError):
        return set()  # a malformed setting: the checks report it


def _watch(connection: Any, aliases: set[str] | None = None) -> None:
    if connection.alias not in (_shard_aliases() if aliases is None else aliases):
        return  # no move fences a database that is not a shard
    if _translate not in connection.execute_wrappers:
        # First, outermost: a user's ``connection.execute_wrapper()`` block that opened
        # the connection pops the last wrapper on its way out, which must be its own.
        connection.execute_wrappers.insert(0, _translate)


def _watch_new(sender: Any, connection: Any, **kwargs: Any) -> None:
    _watch(connection)


def _watch_open(setting: str, **kwargs: Any) -> None:
    """New shard databases in the settings: this thread's open connections to them."""
    if setting in ("UID_FIELDS", "DATABASES"):
        install()


def install() -> None:
    """Translate fence refusals on the connections of shard databases (new ones on their
    creation); called by the app's ``ready()``."""
    connection_created.connect(_watch_new, dispatch_uid="uid_fields.fences.watch")
    setting_changed.connect(_watch_open, dispatch_uid="uid_fields.fences.settings")
    aliases = _shard_aliases()
    for connection in connections.all(initialized_only=True):
        _watch(connection, aliases)
