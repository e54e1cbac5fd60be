"""``logical_shard_move(session, tables, ...)``: the SQLAlchemy side of
``uid_fields.ops.replication`` (a shard move by PostgreSQL logical replication).

The tables and the maps are those of ``shard_move`` (which checks who owns the range);
each engine gives the mover a connection of its own in autocommit (``CREATE
SUBSCRIPTION`` runs outside a transaction) and, for the source, the libpq connection
string the target's server uses to reach it (from the engine's URL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from .._internal import dbapi
from ..ops.replication import Fence, LogicalMove, PgDatabase, logical_refusal, pg_tables
from ..sql.replication import conninfo, move_name
from .moves import shard_move
from .session import ShardedIdSession

__all__ = ["logical_shard_move", "pg_database"]


def pg_database(name: str, engine: Engine) -> PgDatabase:
    """A PostgreSQL engine as one side of a replication move."""
    if engine.dialect.name != "postgresql":
        raise ValueError(f"{name} is {engine.dialect.name}, not PostgreSQL")
    # A driver connection of its own (off the pool: it is left in autocommit), driven
    # without parameters, so the ``%`` of the range predicates is sent as it is.
    raw = engine.raw_connection()
    driver: Any = raw.driver_connection
    raw.detach()
    driver.rollback()
    driver.autocommit = True

    def run(statement: str) -> list[tuple[Any, ...]]:
        with driver.cursor() as cursor:
            cursor.execute(statement)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    url = engine.url
    info = conninfo(
        host=url.host, port=url.port, dbname=url.database, user=url.username, password=url.password
    )
    return PgDatabase(name, run, info, driver.close, port=dbapi.tcp_port(driver))


def logical_shard_move(
    session: ShardedIdSession,
    tables: Iterable[Any],
    *,
    source: str,
    target: str,
    engines: Mapping[str, Engine] | None = None,
    low: int | None = None,
    high: int | None = None,
    state: str | Path | None = None,
    name: str | None = None,
    fence: Fence | None = None,
    **options: Any,
) -> LogicalMove:
    """A ``LogicalMove`` of logical shards ``low:high`` of ``tables`` from ``source`` to
    ``target`` (both PostgreSQL), as ``session`` places them. ``state`` is the file that
    lets a stopped run resume; ``name`` (default: from the databases and the range)
    names the publication, slot and subscription; ``options`` go to ``LogicalMove``
    (``timeout_s``, ``on_progress``, ``poll_s``). Close it after use (``with``)."""
    every = {**session._engines, **(engines or {})}
    move = shard_move(
        session, tables, source=source, target=target, engines=engines, low=low, high=high
    )
    moved = pg_tables(move)
    reason = logical_refusal(moved)
    if reason:
        raise ValueError(reason)
    span = "all" if low is None else f"{low}:{high}"
    name = name or move_name(",".join(t.name for t in moved), source, target, span)
    fence = fence or move.fence
    databases = [pg_database(alias, every[alias]) for alias in (source, target)]
    return LogicalMove(
        move,
        moved,
        source=databases[0],
        target=databases[1],
        name=name,
        fence=fence,
        state=state,
        **options,
    )
