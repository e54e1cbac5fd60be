"""Read replicas of shard databases in Django.

``"replicas": {"shard_1": ["shard_1_r1"]}`` in a ``SHARDS`` entry lets reads of
``shard_1``'s rows go to ``shard_1_r1``. The choice is the core's
(``uid_fields.replicas``); here are its Django inputs:

* a sharded queryset asks ``read_alias(primary)`` for the database to read (writes,
  ``select_for_update()`` and ``get_or_create()`` always use the primary);
* "in a transaction" is ``connections[primary].in_atomic_block``;
* the read-your-writes pins live in a context variable, fresh for every request
  (``request_started``), and a primary is pinned by an execute wrapper on its
  connections that sees every statement that is not a read, whatever ORM path (or raw
  cursor) sent it. Only the connections of primaries with replicas get the wrapper
  (a connection opened before the replicas were configured gets it then).

Rows read from a replica still name their primary in ``_state.db``, so ``save()`` and
related managers write and follow where the row lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.core.signals import request_started, setting_changed
from django.db import connections
from django.db.backends.signals import connection_created
from django.dispatch import receiver

from ...config import replicas_of
from ...ops.replicas import DEFAULT_PIN_SECONDS, Pins, ReadReplicas
from ..conf import conf, settings_generation

__all__ = [
    "WRITE_WATCHER",
    "install",
    "read_alias",
    "read_from_primary",
    "read_pins",
    "replica_primaries",
]

_pins: ContextVar[tuple[int, Pins] | None] = ContextVar("uid_fields_read_pins", default=None)
_primary_only: ContextVar[bool] = ContextVar("uid_fields_primary_only", default=False)
_built: tuple[int, ReadReplicas[str], dict[str, str]] | None = None

#: Statements that write nothing: they do not pin (``SET`` runs when a connection opens).
_READS = ("SELECT", "SET", "SHOW", "SAVEPOINT", "RELEASE", "ROLLBACK", "EXPLAIN", "VALUES")


def _replicas() -> tuple[ReadReplicas[str], dict[str, str]]:
    """The settings' replicas, and each replica's primary (rebuilt when settings change)."""
    global _built
    generation = settings_generation()
    if _built is None or _built[0] != generation:
        merged: dict[str, list[str]] = {}
        for entry in conf.SHARDS.values():
            try:
                found = replicas_of(entry)
            except (TypeError, ValueError):
                continue  # check uid_fields.E014 reports it
            for primary, aliases in found.items():
                merged.setdefault(primary, [])
                merged[primary] += [a for a in aliases if a not in merged[primary]]
        primaries = {replica: p for p, aliases in merged.items() for replica in aliases}
        _built = (generation, ReadReplicas(merged), primaries)
    return _built[1], _built[2]


def replica_primaries() -> dict[str, str]:
    """Replica alias -> the primary it copies."""
    return _replicas()[1]


def read_pins() -> Pins:
    """This request's pins (a new set per request, and per thread outside requests)."""
    generation = settings_generation()
    current = _pins.get()
    if current is None or current[0] != generation:
        try:
            pins = Pins(conf.raw.get("READ_YOUR_WRITES_SECONDS", DEFAULT_PIN_SECONDS))
        except (TypeError, ValueError):
            pins = Pins()  # check uid_fields.E014 reports it
        current = (generation, pins)
        _pins.set(current)
    return current[1]


def read_alias(primary: str) -> str:
    """The database to read ``primary``'s rows from: one of its replicas, or itself."""
    replicas, _ = _replicas()
    if not replicas or _primary_only.get():
        return primary
    in_transaction = connections[primary].in_atomic_block
    return replicas.read_from(primary, in_transaction=in_transaction, pins=read_pins()) or primary


@contextmanager
def read_from_primary() -> Iterator[None]:
    """Reads in the block go to the primaries (a check that must not see lag)."""
    token = _primary_only.set(True)
    try:
        yield
    finally:
        _primary_only.reset(token)


@receiver(request_started)
def _new_request(**kwargs: Any) -> None:
    _pins.set(None)  # each request reads its own writes, not the previous request's


def _pin_on_write(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    alias = context["connection"].alias
    replicas, _ = _replicas()
    if alias in replicas.replicas:
        verb = sql.lstrip(" \n\t(").split(None, 1)[0].upper() if sql.strip() else ""
        if verb not in _READS:
            read_pins().pin(alias)
    return execute(sql, params, many, context)


#: The execute wrapper installed on every connection: it acts on writes only, so a read
#: sent below Django's cursor (``fanout._at_once``) misses nothing of it.
WRITE_WATCHER = _pin_on_write


def _watch(connection: Any) -> None:
    replicas, _ = _replicas()
    if connection.alias not in replicas.replicas:
        return  # a database without replicas: no read of it is sent elsewhere
    if _pin_on_write not in connection.execute_wrappers:
        # First, outermost: a user's ``connection.execute_wrapper()`` block that opened
        # the connection pops the last wrapper on its way out, which must be its own.
        connection.execute_wrappers.insert(0, _pin_on_write)


def _watch_writes(sender: Any, connection: Any, **kwargs: Any) -> None:
    _watch(connection)


def _watch_open(setting: str, **kwargs: Any) -> None:
    """Replicas configured since: this thread's open connections to their primaries."""
    if setting == "UID_FIELDS":
        for connection in connections.all(initialized_only=True):
            _watch(connection)


def install() -> None:
    """Pin primaries on their writes: the wrapper goes on each connection of a primary
    with replicas (new ones on their creation); called by the app's ``ready()``."""
    connection_created.connect(_watch_writes, dispatch_uid="uid_fields.replicas.watch")
    setting_changed.connect(_watch_open, dispatch_uid="uid_fields.replicas.settings")
    for connection in connections.all(initialized_only=True):
        _watch(connection)
