"""Which shards a filter's id lookups name: the values of ``pk=``, ``pk__in=`` and the
shard key, checked against the field so a malformed id narrows to no shard instead of
reaching SQL, and the shards of ``a | b`` and ``a & b``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import models

from .fields import UidField

if TYPE_CHECKING:
    from .query import ShardedQuerySet

__all__ = ["is_id_list", "joined_shards", "lookup_values", "plain_value", "valid_id"]


def plain_value(value: Any) -> Any:
    return value.pk if isinstance(value, models.Model) else value


def valid_id(field: UidField, value: Any) -> bool:
    if hasattr(value, "resolve_expression"):
        return True  # F() and subqueries are the database's to compare
    try:
        converted = field.to_python(value)
        if field.layout is not None and converted is not None:
            field.layout.coerce(converted)  # in range of the layout, not just an int
    except (ValidationError, TypeError, ValueError):
        return False
    return True


def is_id_list(value: Any) -> bool:
    """An iterable of ids, not a subquery or a string."""
    return isinstance(value, Iterable) and not isinstance(value, (models.QuerySet, str, bytes))


def lookup_values(value: Any, kind: str) -> list[Any] | None:
    if kind == "exact":
        return [value]
    return list(value) if is_id_list(value) else None


def joined_shards(a: ShardedQuerySet, b: Any, *, any_of: bool) -> tuple[str, ...] | None:
    """The shards of ``a | b`` (any_of) or ``a & b``; None where either is unrouted."""
    first = a._shard_aliases if a._db is None else (a._db,)
    second = getattr(b, "_shard_aliases", None) if getattr(b, "_db", None) is None else (b._db,)
    if first is None or second is None:
        return None if any_of else (first or second)
    if any_of:
        return tuple(dict.fromkeys((*first, *second)))
    return tuple(x for x in first if x in second) or first[:1]
