"""Filters, orderings and values through a relation whose rows live on another database.

Django compiles ``filter(board__name="x")`` as a JOIN on the one database the query runs
on. For a sharded row's soft key to a row on another shard, or a key to ``auth.User`` on
``default``, the joined table there is missing (an error from the database) or holds
other rows (silently wrong answers). The rule of which relations stay a join is
``joins.stays_joined`` (the one ``select_related`` uses); for every other relation:

- a ``filter()`` lookup whose first hop is a single-valued relation (a forward key, a
  reverse one-to-one) is rewritten into a lookup on the key itself: the related rows'
  keys are read from the database(s) they live on, then ``board__in=[...]``. A key
  IN a list never matches NULL, as the INNER JOIN never does, and a dangling soft key
  matches nothing either way, so the answer is exactly the join's;
- what cannot be rewritten exactly is refused before any query runs with
  ``CrossDatabaseRelationError``: ``exclude()`` and negated ``Q`` (Django's NULL rules
  under negation), lookups that test NULL through the relation (a LEFT JOIN's answer),
  many-valued relations, and orderings, values, annotations and ``F()`` through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models
from django.db import router as db_router
from django.db.models import F, Q
from django.db.models.constants import LOOKUP_SEP

from ..errors import CrossDatabaseRelationError
from .joins import stays_joined
from .routing import parent_link, sharded_pk

__all__ = ["refuse_paths", "rewrite_filter"]


def _first_hop(model: type[models.Model], path: str) -> tuple[Any, str]:
    """(the relation ``path`` starts with, the rest of the path), or (None, "")."""
    name, _, rest = path.partition(LOOKUP_SEP)
    if name == "pk":
        return None, ""
    try:
        found = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None, ""  # an annotation, a FilteredRelation, or a mistake Django reports
    if not getattr(found, "is_relation", False) or found.related_model is None:
        return None, ""
    if found.many_to_many:
        return None, ""  # a link table lives with its source row: docs/relations.md
    return found, rest


def _no_join_needed(relation: Any, rest: str) -> bool:
    """Whether Django reads ``relation__rest`` from the key column without a join: the
    relation itself (``board=``, ``board__in=``) or its target field (``board__id``)."""
    if not relation.concrete or not (relation.many_to_one or relation.one_to_one):
        return False
    head = rest.partition(LOOKUP_SEP)[0]
    if not head or head == "pk":
        return True
    target = relation.related_model
    try:
        target._meta.get_field(head)
    except FieldDoesNotExist:
        return True  # a lookup (``board__isnull``, ``board__in``) on the key
    return head in {"pk", relation.target_field.name, relation.target_field.attname}


def _databases_of(target: type[models.Model]) -> tuple[str, ...]:
    """Where rows of ``target`` live: its shards, or its router's database."""
    pk = sharded_pk(target)
    if pk is None:
        link = parent_link(target)
        pk = sharded_pk(link.related_model) if link is not None else None
    if pk is not None:
        return tuple(pk.placement.databases)
    return (db_router.db_for_read(target),)


def _crossing(
    model: type[models.Model], path: str, databases: Sequence[str]
) -> tuple[Any, str] | None:
    """(relation, rest) when ``path`` goes through a relation to another database."""
    relation, rest = _first_hop(model, path)
    if relation is None or _no_join_needed(relation, rest):
        return None
    if stays_joined(model, relation, databases):
        return None
    return relation, rest


def _refusal(
    model: type[models.Model], path: str, relation: Any, databases: Sequence[str], what: str
) -> CrossDatabaseRelationError:
    target = relation.related_model
    return CrossDatabaseRelationError(
        f"{model.__name__}: {what} through {path!r} needs a JOIN to "
        f"{target._meta.label} (on {list(_databases_of(target))}) on the query's database "
        f"({list(databases)}), where those rows do not live: filter by the key itself "
        f"({relation.name}=..., {relation.name}__in=[...]) or read the "
        f"{target.__name__} rows first"
    )


def _names_in(expression: Any) -> Iterable[str]:
    """Every field path an expression (``F``, ``Count("board__name")``) refers to."""
    if isinstance(expression, str):
        yield expression.lstrip("-")
        return
    if isinstance(expression, F):
        yield str(getattr(expression, "name", ""))
        return
    if isinstance(expression, Q):
        for child in expression.children:
            if isinstance(child, tuple):
                yield child[0]
                yield from _names_in(child[1])
            else:
                yield from _names_in(child)
        return
    sources = getattr(expression, "get_source_expressions", None)
    if sources is None or isinstance(expression, type):
        return
    for source in sources():
        yield from _names_in(source)
    condition = getattr(expression, "filter", None)
    if isinstance(condition, Q):
        yield from _names_in(condition)


def refuse_paths(
    model: type[models.Model], databases: Sequence[str], items: Iterable[Any], what: str
) -> None:
    """Raise ``CrossDatabaseRelationError`` when any of ``items`` (field names,
    expressions) reaches through a relation to another database."""
    for item in items:
        for path in _names_in(item):
            crossing = _crossing(model, path, databases)
            if crossing is not None:
                raise _refusal(model, path, crossing[0], databases, what)


def _matching_keys(relation: Any, rest: str, value: Any) -> tuple[str, list[Any]]:
    """(the lookup on the query's own model, the key values) that match exactly the rows
    whose related row satisfies ``rest=value``, read where the related rows live."""
    target = relation.related_model
    if relation.concrete:
        own, theirs = relation.attname, relation.target_field.attname
    else:  # a reverse one-to-one: the target's key holds our value
        own, theirs = relation.field.target_field.attname, relation.field.attname
    found: dict[Any, None] = {}
    for alias in _databases_of(target):
        # deeper hops are judged again from the related model, on its database
        args, kwargs = rewrite_filter(target, (alias,), False, (), {rest: value})
        rows = target._base_manager.db_manager(alias).filter(*args, **kwargs)
        for key in rows.values_list(theirs, flat=True):
            if key is not None:
                found[key] = None
    return f"{own}__in", list(found)


def _rewrite_leaf(
    model: type[models.Model],
    databases: Sequence[str],
    path: str,
    value: Any,
    negated: bool,
) -> tuple[str, Any]:
    for name in _names_in(value) if not isinstance(value, str) else ():
        crossing = _crossing(model, name, databases)
        if crossing is not None:
            raise _refusal(model, name, crossing[0], databases, "an F() in a filter")
    crossing = _crossing(model, path, databases)
    if crossing is None:
        return path, value
    relation, rest = crossing
    if negated:
        raise _refusal(model, path, relation, databases, "exclude() or a negated Q")
    if not (relation.many_to_one or relation.one_to_one):
        raise _refusal(model, path, relation, databases, "a filter on a many-valued relation")
    if value is None or LOOKUP_SEP + "isnull" in LOOKUP_SEP + rest:
        raise _refusal(model, path, relation, databases, "a NULL test")
    lookup, keys = _matching_keys(relation, rest, value)
    limits = [connections[a].features.max_query_params for a in databases]
    limit = min((n for n in limits if n), default=None)
    if limit is not None and len(keys) > limit:
        what = f"a filter matching {len(keys)} related rows (over the {limit} parameters)"
        raise _refusal(model, path, relation, databases, what)
    return lookup, keys


def _rewrite_q(model: type[models.Model], databases: Sequence[str], q: Q, negated: bool) -> Q:
    negated = negated ^ q.negated
    children: list[Any] = []
    for child in q.children:
        if isinstance(child, Q):
            children.append(_rewrite_q(model, databases, child, negated))
        elif isinstance(child, tuple):
            children.append(_rewrite_leaf(model, databases, child[0], child[1], negated))
        else:
            refuse_paths(model, databases, [child], "an expression in a filter")
            children.append(child)
    rewritten = Q(*children, _connector=q.connector, _negated=q.negated)
    return rewritten


def rewrite_filter(
    model: type[models.Model],
    databases: Sequence[str],
    negate: bool,
    args: Sequence[Any],
    kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``filter(*args, **kwargs)`` (``exclude`` when ``negate``) with every lookup
    through a relation to another database rewritten into one on the key, or refused."""
    new_args = tuple(
        _rewrite_q(model, databases, arg, negate) if isinstance(arg, Q) else arg for arg in args
    )
    for arg in new_args:
        if not isinstance(arg, Q):
            refuse_paths(model, databases, [arg], "an expression in a filter")
    new_kwargs: dict[str, Any] = {}
    extra: list[Q] = []
    for path, value in kwargs.items():
        lookup, found = _rewrite_leaf(model, databases, path, value, negate)
        if lookup in new_kwargs or (lookup in kwargs and lookup != path):
            extra.append(Q(**{lookup: found}))  # two rewritten lookups on one key: AND
        else:
            new_kwargs[lookup] = found
    return new_args + tuple(extra), new_kwargs
