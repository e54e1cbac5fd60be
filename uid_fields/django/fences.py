"""A shard move's fence, as Django code sees it: ``ShardMoveFencedError``.

While a move switches a range (``manage.py uid_fields move-shards --switch``), triggers
on the source database refuse writes of the range (``uid_fields.ops.fences``). The
driver reports that as a database error of its own kind (PostgreSQL SQLSTATE ``UF001``,
MariaDB's SIGNAL, SQLite's constraint error); this module wraps every connection's
execution (``connection.execute_wrappers``, installed on ``connection_created``) and
raises ``ShardMoveFencedError`` from it instead, on every path: ``save()``,
``delete()``, ``QuerySet.update()``, ``bulk_create``/``bulk_update``, raw cursors.
It is not an ``IntegrityError``, so ``get_or_create`` does not mistake it for a race.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connections
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from ..sql.fences import refusal

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


def _watch(connection: Any) -> None:
    if _translate not in connection.execute_wrappers:
        # First, outermost: a user's ``connection.execute_wrapper()`` block that opened
        # the connection pops the last wrapper on its way out, which must be its own.
        connection.execute_wrappers.insert(0, _translate)


@receiver(connection_created)
def _watch_new(sender: Any, connection: Any, **kwargs: Any) -> None:
    _watch(connection)


def install() -> None:
    """Translate fence refusals on every connection (new ones on their creation);
    called by the app's ``ready()``."""
    for connection in connections.all(initialized_only=True):
        _watch(connection)
