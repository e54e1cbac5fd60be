"""``id__time__gte=dt`` and friends: time filters answered from the id's own index.

Like Django's YearLookup, a datetime on the right becomes integer bounds on the raw
column (``id >= min_id(dt)``), so the primary key index serves time ranges and no
``created_at`` column is needed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import EmptyResultSet, FieldError, ValidationError
from django.db.models import DateTimeField, Lookup, Transform
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ..layouts import IntLayout

__all__ = ["IdTime"]


def _aware(value: Any) -> dt.datetime:
    if isinstance(value, str):
        parsed = parse_datetime(value.strip())
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

    def bounds(self) -> list[tuple[str, int]]:
        raise NotImplementedError

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs_sql, params = compiler.compile(self.lhs.lhs)
        layout = self.layout
        clauses, params = [], list(params)
        for operator, bound in self.bounds():
            if operator == "<" and bound > layout.max_value:
                operator, bound = "<=", layout.max_value  # before a time past the lifetime: all
            if bound > layout.max_value:
                raise EmptyResultSet  # after the lifetime: no id can be there
            clauses.append(f"{lhs_sql} {operator} %s")
            params.append(bound)
        return " AND ".join(clauses), params


@IdTime.register_lookup
class IdTimeGte(_IdTimeLookup):
    lookup_name = "gte"

    def bounds(self) -> list[tuple[str, int]]:
        return [(">=", self.layout.min_id(self.rhs, clamp=True))]


@IdTime.register_lookup
class IdTimeGt(_IdTimeLookup):
    lookup_name = "gt"

    def bounds(self) -> list[tuple[str, int]]:
        return [(">", self.layout.max_id(self.rhs, clamp=True))]


@IdTime.register_lookup
class IdTimeLte(_IdTimeLookup):
    lookup_name = "lte"

    def bounds(self) -> list[tuple[str, int]]:
        return [("<=", self.layout.max_id(self.rhs, clamp=True))]


@IdTime.register_lookup
class IdTimeLt(_IdTimeLookup):
    lookup_name = "lt"

    def bounds(self) -> list[tuple[str, int]]:
        return [("<", self.layout.min_id(self.rhs, clamp=True))]


@IdTime.register_lookup
class IdTimeExact(_IdTimeLookup):
    lookup_name = "exact"

    def bounds(self) -> list[tuple[str, int]]:
        layout = self.layout
        return [
            (">=", layout.min_id(self.rhs, clamp=True)),
            ("<=", layout.max_id(self.rhs, clamp=True)),
        ]


@IdTime.register_lookup
class IdTimeRange(_IdTimeLookup):
    lookup_name = "range"

    def bounds(self) -> list[tuple[str, int]]:
        low, high = self.rhs
        layout = self.layout
        return [(">=", layout.min_id(low, clamp=True)), ("<=", layout.max_id(high, clamp=True))]
