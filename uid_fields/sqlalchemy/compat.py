"""Every private SQLAlchemy API the adapter reads, in one place.

SQLAlchemy keeps a SELECT's clauses in underscore attributes (``_order_by_clauses``,
``_limit_clause`` ...) and a frozen result's rows in ``FrozenResult.data``. They have been
stable across 2.0 and 2.1, but they are not public: when a release changes them, this is
the one module to fix, and ``tests/sqlalchemy/test_compat.py`` is the test that says so.
The greenlet bridge of the asyncio extension (``greenlet_spawn`` runs sync code whose
drivers await; ``await_only`` waits for a coroutine from inside it; 2.1 also names it
``await_``) is imported from here too: ``sqlalchemy.util`` is not documented API; so is
``instance_state`` (``inspect(obj)`` without the inspection registry's dispatch, for
hooks that run for every object built).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import FrozenResult, Result
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.util import await_only, greenlet_spawn

__all__ = [
    "SelectParts",
    "await_only",
    "frozen_rows",
    "greenlet_spawn",
    "instance_state",
    "is_plain_select",
    "result_of",
    "select_parts",
]


@dataclass(frozen=True)
class SelectParts:
    """What a fan-out must know of a SELECT before it runs it on every shard."""

    order_by: list[Any]
    group_by: list[Any]
    distinct: bool
    limit: int | None
    offset: int | None
    has_window: bool  # a LIMIT or OFFSET clause, literal or bound


def select_parts(statement: Select[Any]) -> SelectParts:
    return SelectParts(
        order_by=list(statement._order_by_clauses),
        group_by=list(statement._group_by_clauses),
        distinct=bool(statement._distinct),
        limit=statement._limit,
        offset=statement._offset,
        has_window=statement._limit_clause is not None or statement._offset_clause is not None,
    )


def is_plain_select(clause: Any) -> bool:
    """A SELECT without ``FOR UPDATE``: one a replica may answer."""
    return isinstance(clause, Select) and clause._for_update_arg is None


def frozen_rows(frozen: FrozenResult[Any]) -> list[Any]:
    """The rows a frozen result holds (ORM results of one entity hold the objects)."""
    return list(frozen.data)


def result_of(template: FrozenResult[Any], rows: list[Any]) -> Result[Any]:
    """A result of ``rows`` behind ``template``'s metadata (its columns and entities)."""
    template.data = rows
    return template()
