"""Vetting a fan-out: every construct of a Django query whose answer over shards is not
proven exact, named for the core planner's ``Statement.refused`` (issue 34).

An allowlist: a set operation, ``DISTINCT ON``, ``select_for_update()``, a window, a
join of tables whose rows are not co-located, and any subquery (``Subquery``, ``Exists``,
``__in=<queryset>``) not proven to read only rows of the shard of the row it is asked
for. Proven: a correlation by equality that names the same row, or a row and its
co-located parent or children through the shard key (Django's admin builds
``Exists(Same.objects.filter(pk=OuterRef("pk")))``), and ``key__in=<ids>`` through the
shard key. Read by ``plans`` and by every fan-out path of ``query`` before any query.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.apps import apps
from django.db import models
from django.db.models import Subquery
from django.db.models.expressions import Col
from django.db.models.lookups import Lookup

from ...ops import planner
from ...placement.families import Relation
from ..compat import (
    all_annotations,
    distinct_on,
    is_sql_query,
    joined_tables,
    locks_rows,
    outer_aliases,
    query_is_sliced,
    query_model,
    query_selected,
    set_operation,
    where_of,
)
from ..routing import colocated, relation_of

__all__ = ["joins_stay_on_the_shard", "refusals", "vet", "vet_write"]


def refusals(qs: models.QuerySet[Any]) -> list[str]:
    """Every construct of ``qs`` whose answer over shards is not proven exact, named as
    a user would recognise it."""
    found: list[str] = []
    combinator = set_operation(qs)
    if combinator:
        found.append(f"a set operation ({combinator}())")
    if distinct_on(qs):
        found.append("DISTINCT ON (distinct(*fields))")
    if locks_rows(qs):
        found.append("select_for_update()")
    found += _query_refusals(qs.query, qs.model)
    return found


def _query_refusals(query: Any, model: Any) -> list[str]:
    found: list[str] = []
    joined = _not_co_located(query, model)
    if joined is not None:
        found.append(f"a join of {model.__name__} with {joined}, whose rows are not co-located")
    nodes = [where_of(query), *all_annotations(query).values()]
    if any(getattr(n, "contains_over_clause", False) for n in nodes):
        found.append("a window function (over())")
    for node in nodes:
        for context, inner in _subqueries(node):
            if not _proven_on_the_shard(query, model, context, inner):
                found.append(
                    "a subquery (Subquery, Exists or __in=<queryset>) whose rows may be on "
                    "other shards than the row it is asked for"
                )
            else:
                found += _query_refusals(inner, query_model(inner))
    return found


def _not_co_located(query: Any, model: Any) -> str | None:
    """The name of a model ``query`` joins whose rows may live on other shards than
    ``model``'s (None: every joined table lives with it). Tables of models of no app
    (none here) count as not co-located."""
    tables = {m._meta.db_table: m for m in apps.get_models(include_auto_created=True)}
    tables.update(_reachable(model))  # a model of no installed app (a script's) too
    for table in joined_tables(query):
        other = tables.get(table)
        if other is None:
            return table
        if other is not model and not colocated(model, other):
            return str(other.__name__)
    return None


def joins_stay_on_the_shard(query: Any, model: Any) -> bool:
    """Whether every table ``query`` reads holds rows co-located with ``model``'s.

    ``annotate(Count("purchases"))`` groups by each row: with co-located children every
    group is complete on its shard, so the shards' rows merge as they are. So with every
    level of a family (``Count("projects__tasks")``) and the table of a many-to-many
    relation inside it.
    """
    return _not_co_located(query, model) is None


def _reachable(model: Any) -> dict[str, Any]:
    """The tables of ``model`` and of the models its relations reach directly (with
    many-to-many tables), by table name."""
    found = {model._meta.db_table: model}
    for relation in model._meta.get_fields(include_hidden=True):
        for other in (relation.related_model, getattr(relation.remote_field, "through", None)):
            if isinstance(other, type) and hasattr(other, "_meta"):
                found.setdefault(other._meta.db_table, other)
    return found


def _subqueries(node: Any, context: Any = None) -> Iterator[tuple[Any, Any]]:
    """Each subquery under ``node`` with the lookup (or expression) holding it."""
    if is_sql_query(node):
        yield context, node
        return
    if isinstance(node, Subquery):  # Exists too
        yield node, node.query
        return
    children = getattr(node, "children", None)
    if children is None:
        children = node.get_source_expressions() if hasattr(node, "get_source_expressions") else []
    for child in children:
        if child is not None:
            yield from _subqueries(child, node if isinstance(node, Lookup) else context)


def _proven_on_the_shard(outer: Any, model: Any, context: Any, inner: Any) -> bool:
    """Whether every row ``inner`` can read lives on the shard of the outer row it is
    asked for: correlated by an equality that names the same row or its co-located
    parent or children (``Exists(Same.objects.filter(pk=OuterRef("pk")))``, what
    Django's admin builds), or ``key__in=<parents' ids>`` through the shard key."""
    inner_model = query_model(inner)
    if _not_co_located(inner, inner_model) is not None:
        return False
    if isinstance(context, Subquery):
        externals = outer_aliases(inner)
        for lookup in _conjuncts(where_of(inner)):
            if lookup.lookup_name != "exact":
                continue
            sides = [lookup.lhs, lookup.rhs]
            inner_cols = [c for c in sides if isinstance(c, Col) and c.alias not in externals]
            outer_cols = [c for c in sides if isinstance(c, Col) and c.alias in externals]
            correlated = len(inner_cols) == 1 and len(outer_cols) == 1
            if correlated and _same_shard(inner_cols[0].target, outer_cols[0].target, model):
                return True
        return False
    if isinstance(context, Lookup) and context.lookup_name == "in" and not query_is_sliced(inner):
        lhs, selected = context.lhs, query_selected(inner)
        if isinstance(lhs, Col) and len(selected) == 1 and isinstance(selected[0], Col):
            return _same_shard(selected[0].target, lhs.target, model)
    return False


def _conjuncts(node: Any) -> Iterator[Any]:
    """The lookups ANDed at the top of a WHERE tree (not under OR or NOT)."""
    if getattr(node, "negated", False):
        return
    if hasattr(node, "children") and not isinstance(node, Lookup):
        if node.connector == "AND":
            for child in node.children:
                yield from _conjuncts(child)
        return
    if isinstance(node, Lookup):
        yield node


def _same_shard(inner: Any, outer: Any, model: Any) -> bool:
    """Whether rows equal on the inner field ``inner`` and the outer row's ``outer``
    live on one shard: the same key of one placement, or the shard key of one to the
    primary key of the other."""
    inner_model, outer_model = inner.model, outer.model
    if inner.primary_key and outer.primary_key:
        return bool(inner_model is outer_model or colocated(inner_model, outer_model))
    if inner.is_relation and outer.primary_key:
        return _placed_by(inner, outer_model)
    if outer.is_relation and inner.primary_key:
        return _placed_by(outer, inner_model)
    return False


def _placed_by(key: Any, target: Any) -> bool:
    return bool(
        key.related_model is target
        and relation_of(key) in (Relation.LINK, Relation.FAMILY)
        and colocated(key.model, target)
    )


def vet(qs: models.QuerySet[Any]) -> None:
    """``UnmergeableQueryError`` naming the first construct of ``qs`` not proven to
    decompose, before any query runs."""
    planner.refuse(refusals(qs))


def vet_write(qs: models.QuerySet[Any], values: Iterable[Any] = ()) -> None:
    """``UnmergeableQueryError`` for an ``update()`` or ``delete()`` over shards whose
    rows are not proven per shard (each shard runs it on its own rows: a subquery of
    every shard's rows, or a join of rows that are not co-located, would pick other
    rows), before any write; ``values`` are ``update()``'s new values."""
    found = _query_refusals(qs.query, qs.model)
    for value in values:
        if any(True for _ in _subqueries(value)):
            found.append("update() to a subquery's value")
    planner.refuse(found)
