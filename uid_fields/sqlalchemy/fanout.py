"""Explicit fan-out: one SELECT run on every shard, merged as one database would answer.

``session.on_all_shards(select(...))`` runs the statement once per shard and merges the
rows: in the statement's ORDER BY (by default the id, which for these ids is creation
time), with LIMIT pushed down to each shard (``LIMIT offset + limit``) and applied again
after the merge; ``count()`` and ``sum()`` are added up, ``min()``/``max()`` taken over
the shards. What cannot be merged from per-shard answers (GROUP BY, DISTINCT, AVG, an
ORDER BY on something that is not a selected column) is refused with an error that says
so, before any statement runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import FrozenResult, Result, Row
from sqlalchemy.orm import Mapper
from sqlalchemy.orm.exc import UnmappedColumnError
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import ColumnElement, Label, UnaryExpression
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.schema import Column

__all__ = ["FanOutPlan", "UnmergeableQueryError", "plan_fan_out"]

_COMBINE: dict[str, Callable[[list[Any]], Any]] = {
    "count": lambda values: sum(v or 0 for v in values),
    "sum": lambda values: (
        sum(v for v in values if v is not None) if any(v is not None for v in values) else None
    ),
    "min": lambda values: min((v for v in values if v is not None), default=None),
    "max": lambda values: max((v for v in values if v is not None), default=None),
}


class UnmergeableQueryError(NotImplementedError):
    """A fanned-out query whose per-shard answers cannot be merged into the right one."""


@dataclass(frozen=True)
class FanOutPlan:
    """What each shard runs and how the answers are put together."""

    per_shard: Select[Any]
    sort: list[tuple[Callable[[Any], Any], bool]]  # (key of a row, descending)
    window: tuple[int, int | None] | None  # (offset, limit) applied after the merge
    aggregates: list[Callable[[list[Any]], Any]] | None  # one combiner per column

    def merge(self, results: Sequence[Result[Any]]) -> Result[Any]:
        frozen: list[FrozenResult[Any]] = [result.freeze() for result in results]
        if self.aggregates is not None:
            firsts = [_as_tuple(f.data[0]) for f in frozen if f.data]
            columns = list(zip(*firsts, strict=True))
            row = tuple(
                combine(list(col)) for combine, col in zip(self.aggregates, columns, strict=True)
            )
            scalar = bool(frozen[0].data) and not isinstance(frozen[0].data[0], (Row, tuple))
            return _result(frozen[0], [row[0] if scalar else row])
        rows = [row for f in frozen for row in f.data]
        for key, descending in reversed(self.sort):
            rows.sort(key=lambda row, k=key: _none_last(k(row)), reverse=descending)  # type: ignore[misc]
        if self.window is not None:
            offset, limit = self.window
            rows = rows[offset : None if limit is None else offset + limit]
        return _result(frozen[0], rows)


def _result(template: FrozenResult[Any], rows: list[Any]) -> Result[Any]:
    template.data = rows  # the shards' rows, merged, behind the first shard's metadata
    return template()


def _as_tuple(row: Any) -> tuple[Any, ...]:
    return tuple(row) if isinstance(row, (Row, tuple)) else (row,)


def _none_last(value: Any) -> tuple[bool, Any]:
    return (value is None, value)


def plan_fan_out(statement: Any) -> FanOutPlan:
    """How to run ``statement`` on every shard; ``UnmergeableQueryError`` if it cannot."""
    if not isinstance(statement, Select):
        raise UnmergeableQueryError(
            "on_all_shards() merges SELECT statements; send UPDATE and DELETE with id "
            "criteria, or to each shard with bind_arguments={'shard_id': ...}"
        )
    if statement._group_by_clauses:
        raise UnmergeableQueryError(
            "GROUP BY across shards cannot be merged (a group may span shards); run it per "
            "shard with bind_arguments={'shard_id': ...} and combine the groups yourself"
        )
    if statement._distinct:
        raise UnmergeableQueryError(
            "DISTINCT across shards cannot be merged; run it per shard and combine"
        )
    selected = list(statement.selected_columns)
    functions = [_function_name(c) for c in selected]
    if any(name is not None for name in functions):
        unknown = [n for n in functions if n not in _COMBINE]
        if unknown:
            raise UnmergeableQueryError(
                f"{unknown[0] or 'a plain column'} next to aggregates cannot be combined "
                "across shards: only count(), sum(), min() and max() are (AVG needs the "
                "sum and the count: select both and divide)"
            )
        if statement._limit_clause is not None or statement._offset_clause is not None:
            raise UnmergeableQueryError("LIMIT/OFFSET of an aggregate across shards")
        return FanOutPlan(statement, [], None, [_COMBINE[n] for n in functions])  # type: ignore[index]
    order = list(statement._order_by_clauses)
    if not order:
        order = [c for c in _entity_ids(statement)]
        statement = statement.order_by(*order)
    sort = [_sort_key(statement, clause) for clause in order]
    window = None
    limit, offset = statement._limit, statement._offset
    per_shard = statement
    if limit is not None or offset:
        window = (offset or 0, limit)
        per_shard = statement.offset(None).limit(None if limit is None else (offset or 0) + limit)
    return FanOutPlan(per_shard, sort, window, None)


def _function_name(column: Any) -> str | None:
    element = column.element if isinstance(column, Label) else column
    if isinstance(element, FunctionElement):
        return str(element.name).lower()
    return None


def _entity_ids(statement: Select[Any]) -> list[ColumnElement[Any]]:
    """The primary key of the first entity selected: the default merge order."""
    for description in statement.column_descriptions:
        entity = description.get("entity")
        mapper = getattr(entity, "__mapper__", None)
        if isinstance(mapper, Mapper):
            return list(mapper.primary_key)
    raise UnmergeableQueryError(
        "a fan-out of plain columns needs an ORDER BY to merge the shards' rows"
    )


def _sort_key(statement: Select[Any], clause: Any) -> tuple[Callable[[Any], Any], bool]:
    descending = False
    element = clause
    if isinstance(clause, UnaryExpression) and clause.modifier in (
        operators.desc_op,
        operators.asc_op,
    ):
        descending = clause.modifier is operators.desc_op
        element = clause.element
    while isinstance(element, Label):
        element = element.element
    descriptions = statement.column_descriptions
    entities = [
        (position, d["entity"].__mapper__)
        for position, d in enumerate(descriptions)
        if d.get("entity") is not None
        and d.get("expr") is d.get("entity")
        and isinstance(getattr(d["entity"], "__mapper__", None), Mapper)
    ]
    if entities and isinstance(element, Column):
        for position, mapper in entities:
            try:
                prop = mapper.get_property_by_column(element)
            except UnmappedColumnError:  # not a column of this entity
                continue
            get = _by_position(position, len(descriptions))
            return (lambda row, g=get, k=prop.key: getattr(g(row), k)), descending
    if not entities:
        for position, column in enumerate(statement.selected_columns):
            plain = column.element if isinstance(column, Label) else column
            if plain is element or plain.compare(element):
                return _by_position(position, len(descriptions)), descending
    raise UnmergeableQueryError(
        f"ORDER BY {element} across shards: order by a selected column or a column of "
        "the selected entity, so the shards' rows can be merged"
    )


def _by_position(position: int, width: int) -> Callable[[Any], Any]:
    def get(row: Any) -> Any:
        # Frozen ORM results of one entity hold the objects themselves, not rows.
        return row[position] if isinstance(row, (Row, tuple)) else row

    return get
