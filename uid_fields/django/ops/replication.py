"""The Django side of ``uid_fields.ops.replication``: a shard move between PostgreSQL
databases by logical replication (``manage.py uid_fields move-shards``).

The tables and maps are those of ``shard_move`` (which checks who owns the range).
Each alias gives the mover a connection of its own, opened with the alias's own
settings (``get_new_connection``) and kept in autocommit (``CREATE SUBSCRIPTION`` runs
outside a transaction), and, for the source, the libpq connection string the target's
server uses to reach it, from the ``DATABASES`` entry (HOST, PORT, NAME, USER,
PASSWORD). A HOST that means something else on the target's server (a socket
directory, ``localhost`` across containers) needs ``OPTIONS["replication_host"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import connections

from ..._internal import dbapi
from ...ops.moves import ShardMove
from ...ops.replication import LogicalMove, PgDatabase, logical_refusal, pg_tables
from ...sql.replication import conninfo, move_name

__all__ = ["logical_refusal_of", "logical_shard_move", "pg_database"]


def pg_database(alias: str) -> PgDatabase:
    """The database ``alias`` as one side of a replication move."""
    wrapper = connections[alias]
    if wrapper.vendor != "postgresql":
        raise ValueError(f"{alias} is {wrapper.vendor}, not PostgreSQL")
    raw: Any = wrapper.get_new_connection(wrapper.get_connection_params())
    raw.autocommit = True

    def run(statement: str) -> list[tuple[Any, ...]]:
        with raw.cursor() as cursor:
            cursor.execute(statement)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    settings = wrapper.settings_dict
    options = settings.get("OPTIONS") or {}
    info = conninfo(
        host=options.get("replication_host") or settings.get("HOST") or None,
        port=settings.get("PORT") or None,
        dbname=settings.get("NAME"),
        user=settings.get("USER") or None,
        password=settings.get("PASSWORD") or None,
    )
    return PgDatabase(alias, run, info, raw.close, port=dbapi.tcp_port(raw))


def logical_refusal_of(move: ShardMove) -> str | None:
    """Why ``move`` cannot go by replication (None: it can): both databases must be
    PostgreSQL, and every table's route must select logical shards in SQL."""
    for alias in (move.source, move.target):
        vendor = connections[alias].vendor
        if vendor != "postgresql":
            return f"{alias} is {vendor}: a move by logical replication needs PostgreSQL on both"
    return logical_refusal(pg_tables(move))


def logical_shard_move(
    move: ShardMove, *, map_name: str, state: str | Path | None = None, **options: Any
) -> LogicalMove:
    """A ``LogicalMove`` of ``move``'s range and tables (``shard_move(...)`` with
    ``state=None``: the replication keeps a state of its own). ``options`` go to
    ``LogicalMove`` (``timeout_s``, ``on_progress``, ``poll_s``). Close it after use."""
    tables = pg_tables(move)
    span = "all" if move.low is None else f"{move.low}:{move.high}"
    name = move_name(map_name, move.source, move.target, span)
    return LogicalMove(
        move,
        tables,
        source=pg_database(move.source),
        target=pg_database(move.target),
        name=name,
        fence=move.fence,
        state=state,
        **options,
    )
