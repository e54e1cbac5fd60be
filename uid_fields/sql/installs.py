"""What installing an id function says: whether it was there, and the log line.

The adapters run a function's statements on their own connections (a Django migration,
``check-db --fix``, SQLAlchemy's ``DatabaseIds.install``); each asks this module whether
the function is there first (``exists_query``) and reports what it did afterwards, so an
operator sees on ``uid_fields.next_id`` (INFO, docs/logging.md) every ``next_id`` and
decimal function installed, replaced or dropped, on which database, stamping which shard.
"""

from __future__ import annotations

import logging
from typing import Any

from .mysql import DecimalIdFunction
from .postgres import NextIdFunction

__all__ = ["IdFunction", "dropped", "exists_query", "installed", "was_installed"]

log = logging.getLogger("uid_fields.next_id")

IdFunction = NextIdFunction | DecimalIdFunction


def exists_query(function: IdFunction) -> tuple[str, tuple[str]]:
    """SQL (``%s`` parameters) and its parameters: one row whose one value is true when
    ``function`` is installed in the connection's database (its current schema)."""
    if isinstance(function, NextIdFunction):
        return "SELECT to_regprocedure(%s) IS NOT NULL", (f"{function.name}(integer)",)
    return (
        "SELECT COUNT(*) > 0 FROM information_schema.ROUTINES "
        "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = %s",
        (function.name,),
    )


def was_installed(cursor: Any, function: IdFunction) -> bool:
    """Whether ``function`` is installed, asked through a DB-API cursor."""
    sql, params = exists_query(function)
    cursor.execute(sql, params)
    row = cursor.fetchone()
    return bool(row and row[0])


def _stamps(function: IdFunction) -> str:
    if isinstance(function, DecimalIdFunction):
        return f"server {function.server}"
    shard = (
        "no logical shard yet (name() refuses until a map gives the database a range)"
        if function.shard is None
        else f"logical shard {function.shard}"
    )
    return f"{shard}, {function.language}"


def installed(function: IdFunction, database: str, *, existed: bool | None) -> None:
    """Log that ``function`` was installed on ``database`` (``existed``: it was there
    before and was replaced; None when that is not known)."""
    verb = {False: "installed", True: "replaced", None: "installed (or replaced)"}[existed]
    log.info("%s %s() on %s: %s", verb, function.name, database, _stamps(function))


def dropped(function: IdFunction, database: str) -> None:
    log.info("dropped %s() on %s", function.name, database)
