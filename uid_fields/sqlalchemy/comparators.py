"""``Order.id.time >= dt``: time predicates rewritten as integer bounds on the id.

The id's high bits are its time, so "created since t" is ``id >= min_id(t)``: a primary
key range scan, no function over every row and no extra column. Comparisons have the
layout's time resolution (1 ms for most layouts): an instant stands for its whole time
unit. Instants outside the layout's lifetime never become out-of-range bigint literals;
they give conditions that are always true (``id IS NOT NULL``) or always false.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import false, literal
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from ..ids.layouts import IntLayout

__all__ = ["IdTime"]

_OPERATORS = {">=": operators.ge, ">": operators.gt, "<=": operators.le, "<": operators.lt}

Instant = datetime | int  # an aware datetime, or Unix milliseconds


class IdTime:
    """The creation time of the ids in a column, as comparisons that compile to bounds."""

    __slots__ = ("column", "layout")

    def __init__(self, column: ColumnElement[Any], layout: IntLayout) -> None:
        self.column = column
        self.layout = layout

    def _bound(self, value: int) -> ColumnElement[Any]:
        # literal_execute: the statement stays cacheable, the database sees the integer.
        id_type: TypeEngine[Any] = self.column.type
        return literal(value, id_type, literal_execute=True)

    def _always(self) -> ColumnElement[bool]:
        return self.column.is_not(None)

    def _compare(self, op: str, at: Instant) -> ColumnElement[bool]:
        condition = self.layout.time_condition(op, at)
        if condition is True:
            return self._always()
        if condition is False:
            return false()
        op, bound = condition
        return self.column.operate(_OPERATORS[op], self._bound(bound))

    def __ge__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare(">=", at)

    def __gt__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare(">", at)

    def __le__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare("<=", at)

    def __lt__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare("<", at)

    def between(self, start: Instant, end: Instant) -> ColumnElement[bool]:
        """Ids made from ``start`` to ``end``, both time units included."""
        return (self >= start) & (self <= end)

    def __eq__(self, at: object) -> ColumnElement[bool]:  # type: ignore[override]
        """Ids made in the time unit of ``at``."""
        if not isinstance(at, (datetime, int)):
            return NotImplemented
        return self.between(at, at)

    def __ne__(self, at: object) -> ColumnElement[bool]:  # type: ignore[override]
        if not isinstance(at, (datetime, int)):
            return NotImplemented
        return (self < at) | (self > at)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<IdTime of {self.column}>"
