"""Which databases a query of follower rows names through their parent.

A follower has a uid id of its own that names no shard, and a foreign key (with its
constraint) to a sharded parent, whose database it lives on (``routing.parent_link``).
Its own id cannot route a query, but the parent's id can: ``filter(order=o)``,
``filter(order_id=x)``, ``filter(order__pk=x)`` and their ``__in`` forms name the
databases of those parents, as the parent's placement decides. A malformed parent id
matches no row, as a malformed id does for the parent itself.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from ..fields import UidField
from ..routing import sharded_pk
from .id_lookups import is_id_list, lookup_values, plain_value, valid_id

__all__ = ["clean_parent_lookups", "parent_databases", "parent_lookup_kind"]


def _parent_field(link: Any) -> UidField | None:
    """The parent's sharded id, when the foreign key stores it (not a ``to_field``)."""
    field = sharded_pk(link.related_model)
    if field is None or link.target_field is not field:
        return None
    return field


def parent_lookup_kind(link: Any, lookup: str) -> str | None:
    """``"exact"`` or ``"in"`` when ``lookup`` compares the parent's id, else None.

    The names Django resolves to the foreign key's own column, without a join:
    ``order``, ``order_id``, ``order__pk`` and ``order__<parent pk name>``.
    """
    field = _parent_field(link)
    if field is None:
        return None
    for head in (link.name, link.attname, f"{link.name}__pk", f"{link.name}__{field.name}"):
        if lookup in (head, f"{head}__exact"):
            return "exact"
        if lookup == f"{head}__in":
            return "in"
    return None


def clean_parent_lookups(link: Any, kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``kwargs`` with malformed parent ids taken out, and whether an exact one was
    malformed (then nothing matches). One-shot iterators of ``__in`` are read once here."""
    field = _parent_field(link)
    clean: dict[str, Any] = {}
    impossible = False
    for lookup, value in kwargs.items():
        kind = parent_lookup_kind(link, lookup)
        if field is None or kind is None:
            clean[lookup] = value
        elif kind == "exact":
            if value is None or isinstance(value, models.Model) or valid_id(field, value):
                clean[lookup] = value
            else:
                impossible = True
        elif is_id_list(value):
            clean[lookup] = [v for v in value if valid_id(field, plain_value(v))]
        else:
            clean[lookup] = value
    return clean, impossible


def parent_databases(link: Any, kwargs: dict[str, Any]) -> set[str] | None:
    """The databases the parent ids in ``kwargs`` name (their intersection when several
    lookups name parents); None when no lookup names a parent by value."""
    field = _parent_field(link)
    if field is None:
        return None
    found: set[str] | None = None
    for lookup, value in kwargs.items():
        kind = parent_lookup_kind(link, lookup)
        values = lookup_values(value, kind) if kind is not None else None
        if values is None or any(hasattr(v, "resolve_expression") for v in values):
            continue  # a subquery or an F(): the database's to compare, no shard named
        aliases: set[str] = set()
        for item in values:
            with suppress(
                TypeError, ValueError, ValidationError
            ):  # no parent can have it: no row matches
                aliases.add(field.placement.database_of(field.to_python(plain_value(item))))
        found = aliases if found is None else found & aliases
    return found
