"""``id__time__gte=dt`` and friends: time filters answered from the id's own index.

Like Django's YearLookup, a datetime on the right becomes integer bounds on the raw
column (``id >= min_id(dt)``), so the primary key index serves time ranges and no
``created_at`` column is needed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import EmptyResultSet, FieldError, FullResultSet, ValidationError
from django.db.models import DateTimeField, Lookup, Transform
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ...ids.layouts import IntLayout

__all__ = ["IdTime"]


def _aware(value: Any) -> dt.datetime:
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value.strip())
        except ValueError:  # well formed but impossible: "2024-13-45"
            parsed = None
        if parsed is None:
            raise ValidationError(f"{value!r} is not a date/time", code="invalid")
        value = parsed
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time())
    if not isinstance(value, dt.datetime):
        raise TypeError(f"time lookups take a datetime, got {type(value).__name__}")
    if timezone.is_naive(value):
        return timezone.make_aware(value, timezone.get_default_timezone())
    return value


class IdTime(Transform):
    """The creation time embedded in an id; only usable in filters with a value."""

    lookup_name = "time"
    output_field = DateTimeField()

    def as_sql(self, compiler: Any, connection: Any, *args: Any, **kwargs: Any) -> Any:
        raise FieldError(
            "__time of an id can only be compared with a datetime value "
            "(gt, gte, lt, lte, exact, range); it is not a column to select"
        )


class _IdTimeLookup(Lookup):
    prepare_rhs = False
    operator = ""

    def get_prep_lookup(self) -> Any:
        if hasattr(self.rhs, "resolve_expression"):
            raise FieldError("__time lookups of an id take a datetime value, not an expression")
        if self.lookup_name == "range":
            low, high = self.rhs
            return (_aware(low), _aware(high))
        return _aware(self.rhs)

    @property
    def layout(self) -> IntLayout:
        layout = self.lhs.lhs.output_field.layout
        if not isinstance(layout, IntLayout):
            raise FieldError("__time lookups need an integer id layout")
        return layout

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        """(operator, instant) pairs that all hold for a matching id."""
        raise NotImplementedError

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs_sql, lhs_params = compiler.compile(self.lhs.lhs)
        clauses, params = [], []
        for op, at in self.comparisons():
            condition = self.layout.time_condition(op, at)
            if condition is False:
                raise EmptyResultSet  # no id can be there (outside the lifetime)
            if condition is not True:
                clauses.append(f"{lhs_sql} {condition[0]} %s")
                params += [*lhs_params, condition[1]]
        if not clauses:
            raise FullResultSet  # every id qualifies
        return " AND ".join(clauses), params


@IdTime.register_lookup
class IdTimeGte(_IdTimeLookup):
    lookup_name = "gte"

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        return [(">=", self.rhs)]


@IdTime.register_lookup
class IdTimeGt(_IdTimeLookup):
    lookup_name = "gt"

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        return [(">", self.rhs)]


@IdTime.register_lookup
class IdTimeLte(_IdTimeLookup):
    lookup_name = "lte"

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        return [("<=", self.rhs)]


@IdTime.register_lookup
class IdTimeLt(_IdTimeLookup):
    lookup_name = "lt"

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        return [("<", self.rhs)]


@IdTime.register_lookup
class IdTimeExact(_IdTimeLookup):
    lookup_name = "exact"

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        return [(">=", self.rhs), ("<=", self.rhs)]


@IdTime.register_lookup
class IdTimeRange(_IdTimeLookup):
    lookup_name = "range"

    def comparisons(self) -> list[tuple[str, dt.datetime]]:
        low, high = self.rhs
        return [(">=", low), ("<=", high)]
