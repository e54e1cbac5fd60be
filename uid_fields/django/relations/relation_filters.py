"""Filters, orderings and values through a relation whose rows live on another database.

Django compiles ``filter(board__name="x")`` as a JOIN on the one database the query runs
on. For a sharded row's soft key to a row on another shard, or a key to ``auth.User`` on
``default``, the joined table there is missing (an error from the database) or holds
other rows (silently wrong answers). The rule of which relations stay a join is
``joins.stays_joined`` (the one ``select_related`` uses); for every other relation:

- a ``filter()`` lookup whose first hop is a single-valued relation (a forward key, a
  reverse one-to-one) is rewritten into ``RelatedKeysIn``, a condition on the key
  itself: each time the query is compiled to run, the related rows' keys are read from
  the database(s) they live on and the condition becomes ``key IN (...)``. Reading
  them when ``filter()`` is called would freeze them into a queryset built once and
  run many times (a view's class attribute, ``limit_choices_to``): stale keys, wrong
  rows, and queries at import. A key IN a list never matches NULL, as the INNER JOIN
  never does, and a dangling soft key matches nothing either way, so the answer is
  exactly the join's;
- what cannot be rewritten exactly is refused before any query runs with
  ``CrossDatabaseRelationError``: ``exclude()`` and negated ``Q`` (Django's NULL rules
  under negation), lookups that test NULL through the relation (a LEFT JOIN's answer),
  many-valued relations, and orderings, values, annotations and ``F()`` through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.db import router as db_router
from django.db.models import F, Q
from django.db.models.constants import LOOKUP_SEP
from django.db.models.lookups import In, Lookup

from ...errors import CrossDatabaseRelationError
from ..routing import parent_link, sharded_pk
from .joins import stays_joined

__all__ = ["RelatedKeysIn", "refuse_paths", "rewrite_filter"]


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


def _key_names(relation: Any) -> tuple[str, str]:
    """(our column holding the key, the related model's field it matches)."""
    if relation.concrete:
        return relation.attname, relation.target_field.attname
    # a reverse one-to-one: the target's key holds our value
    return relation.field.target_field.attname, relation.field.attname


def _matching_keys(relation: Any, rest: str, value: Any) -> list[Any]:
    """The key values that match exactly the rows whose related row satisfies
    ``rest=value``, read now, where the related rows live."""
    target = relation.related_model
    theirs = _key_names(relation)[1]
    found: dict[Any, None] = {}
    for alias in _databases_of(target):
        # deeper hops are judged again from the related model, on its database
        args, kwargs = rewrite_filter(target, (alias,), False, (), {rest: value})
        rows = target._base_manager.db_manager(alias).filter(*args, **kwargs)
        for key in rows.values_list(theirs, flat=True):
            if key is not None:
                found[key] = None
    return list(found)


class RelatedKeysIn(Lookup):
    """``<our key> IN (the keys of the related rows matching rest=value)``, the keys read
    from the related rows' database(s) when the query is compiled, never before.

    A conditional expression Django accepts in ``filter()`` and in ``Q``; a ``Lookup``
    so that it is the WHERE condition itself (another conditional expression is compared
    with TRUE, which MySQL cannot answer from an index). A fan-out compiles the query
    once per shard, so the keys are read once per shard the query runs on: each read is
    the answer at that moment, and nothing is cached on the expression, which every
    clone of a queryset built once shares."""

    prepare_rhs = False

    def __init__(self, model: type[models.Model], path: str, value: Any) -> None:
        relation, rest = _first_hop(model, path)
        self.model = model
        self.path = path
        self.value = value
        self.rest = rest
        self.relation_name = relation.name
        # the rhs is what the lookup is about, not SQL: it names it in repr() and equality
        super().__init__(F(_key_names(relation)[0]), (path, value))

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        relation = self.model._meta.get_field(self.relation_name)
        keys = _matching_keys(relation, self.rest, self.value)
        limit = connection.features.max_query_params
        if limit is not None and len(keys) > limit:
            what = f"a filter matching {len(keys)} related rows (over the {limit} parameters)"
            raise _refusal(self.model, self.path, relation, (connection.alias,), what)
        # no keys: ``In`` raises EmptyResultSet, which Django's WHERE handles as ``IN ()``
        # (nothing under AND, a dropped branch under OR), exactly the eager rewrite's answer
        sql, params = compiler.compile(In(self.lhs, keys))
        return sql, tuple(params)


def _rewrite_leaf(
    model: type[models.Model],
    databases: Sequence[str],
    path: str,
    value: Any,
    negated: bool,
) -> tuple[str, Any] | RelatedKeysIn:
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
    target = relation.related_model
    for alias in _databases_of(target):
        # what a deeper hop can never answer is refused now; this reads nothing
        rewrite_filter(target, (alias,), False, (), {rest: value})
    return RelatedKeysIn(model, path, value)


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
    extra: list[Any] = []
    for path, value in kwargs.items():
        rewritten = _rewrite_leaf(model, databases, path, value, negate)
        if isinstance(rewritten, RelatedKeysIn):
            extra.append(rewritten)  # ANDed with the rest, as every filter() argument is
        else:
            new_kwargs[rewritten[0]] = rewritten[1]
    return new_args + tuple(extra), new_kwargs
