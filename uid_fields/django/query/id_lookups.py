"""Which shards a filter's id lookups name: the values of ``pk=``, ``pk__in=`` and the
shard key (``=`` and ``__in``), also inside ``Q`` objects (AND and OR combined by the
core's ``uid_fields.placement.conditions``), checked against the field so a malformed id
narrows to no shard instead of reaching SQL, and the shards of ``a | b`` and ``a & b``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import suppress
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from ...placement import all_of, any_of
from ...placement.conditions import Databases
from .. import compat
from ..fields import UidField

__all__ = [
    "ROUTING_LOOKUPS",
    "condition_shards",
    "filter_shards",
    "is_id_list",
    "joined_shards",
    "lookup_shards",
    "lookup_values",
    "plain_value",
    "valid_id",
]

#: The lookups that name shards: an exact value, or a list of them.
ROUTING_LOOKUPS = {"": "exact", "exact": "exact", "in": "in"}


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


def joined_shards(a: models.QuerySet[Any], b: Any, *, any_of: bool) -> tuple[str, ...] | None:
    """The shards of ``a | b`` (any_of) or ``a & b``; None where either is unrouted."""
    first, second = _shards_of(a), _shards_of(b)
    if first is None or second is None:
        return None if any_of else (first or second)
    if any_of:
        return tuple(dict.fromkeys((*first, *second)))
    return tuple(x for x in first if x in second) or first[:1]


def _shards_of(qs: Any) -> tuple[str, ...] | None:
    """The database a query names, else the shards the sharded QuerySet routed it to
    (None: unrouted, or a QuerySet of no sharded model)."""
    db = compat.explicit_database(qs) if isinstance(qs, models.QuerySet) else None
    return (db,) if db is not None else getattr(qs, "_shard_aliases", None)


def _is_expression(value: Any) -> bool:
    return hasattr(value, "resolve_expression")  # F(), a subquery: the database compares


def _key_lookup(key: Any, rest: str) -> str | None:
    """The routing kind of a lookup on the shard key, after its name: ``""``, ``exact``,
    ``in``, and for a foreign key also through its target (``customer__pk__in``)."""
    if key.is_relation:
        head, _, tail = rest.partition("__")
        if head in ("pk", key.target_field.name):
            rest = tail
    return ROUTING_LOOKUPS.get(rest)


def lookup_shards(
    field: UidField, lookup: str, value: Any, family: Mapping[str, UidField] | None = None
) -> Databases:
    """The databases one keyword lookup of a filter names (None: it names none).

    ``pk``/``id`` with ``=`` or ``__in`` name the databases of their ids; the shard key
    with ``=`` or ``__in`` the databases of its keys. A value no row can have (a
    malformed id, a key out of range, NULL in a list) names no database of its own.
    """
    base, _, rest = lookup.partition("__")
    pk_names = {"pk", field.name, field.attname}
    key = field.shard_key_field() if field.shard_key else None
    if base in pk_names:
        kind = ROUTING_LOOKUPS.get(rest)
        values = lookup_values(value, kind) if kind is not None else None
        if values is None or any(_is_expression(v) for v in values):
            return None
        aliases: set[str] = set()
        for item in values:
            with suppress(TypeError, ValueError):  # an id no shard can hold matches no row
                aliases.add(field.placement.database_of(plain_value(item)))
        return frozenset(aliases)
    if family and base in family and rest in ("", "exact"):
        # A key inside the family names a row of the rows' own database.
        if value is None or _is_expression(value):
            return None
        try:
            return frozenset({family[base].placement.database_of(plain_value(value))})
        except (TypeError, ValueError):
            return frozenset()  # an id no row can have
    if key is None or base not in (key.name, key.attname):
        return None
    kind = _key_lookup(key, rest)
    values = lookup_values(value, kind) if kind is not None else None
    if values is None or any(_is_expression(v) for v in values):
        return None
    if kind == "exact" and value is None:
        return None  # `key=None` is Django's IS NULL: left to the database
    aliases = set()
    for item in values:
        try:
            databases = field.databases_for_key(item)
        except (TypeError, ValueError):
            continue  # a key no row can have (a parent id out of range)
        aliases.update(databases or ())
    return frozenset(aliases)


def condition_shards(
    field: UidField, condition: Any, family: Mapping[str, UidField] | None = None
) -> Databases:
    """The databases a ``Q`` names: its AND of children, or OR (and XOR, whose rows are
    some of the OR's), combined by the core's rules; a negation names none."""
    if not isinstance(condition, Q) or condition.negated:
        return None
    parts = [
        condition_shards(field, child, family)
        if isinstance(child, Q)
        else lookup_shards(field, child[0], child[1], family)
        if isinstance(child, tuple) and len(child) == 2
        else None
        for child in condition.children
    ]
    return all_of(parts) if condition.connector == Q.AND else any_of(parts)


def filter_shards(
    field: UidField,
    args: Iterable[Any],
    kwargs: dict[str, Any],
    family: Mapping[str, UidField] | None = None,
) -> Databases:
    """The databases ``filter(*args, **kwargs)`` names: all of its conditions ANDed.
    ``family`` maps the names of keys inside the row's family to the sharded id of the
    row they name (that row is on the rows' own database)."""
    parts = [lookup_shards(field, lookup, value, family) for lookup, value in kwargs.items()]
    parts.extend(condition_shards(field, arg, family) for arg in args)
    return all_of(parts)
