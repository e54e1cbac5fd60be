"""``select_related`` across databases: a join only where both sides share a database.

Django's ``select_related`` is a JOIN, sent to the one database the query runs on. Rows a
sharded row points at may live on another shard (a soft key, ``db_constraint=False``) or
on ``default`` (``auth.User``): there the JOIN either hides the row (an INNER JOIN finds
no partner) or fails (the table is not on the shard). So the relations ``select_related``
names are split:

- a relation whose rows live on the query's database by construction stays a join: a
  child's shard key (or a follower's key) to its parent, a key with a database
  constraint between co-located models (the checks refuse constraints across databases,
  ``uid_fields.E011``), an ordinary model read from the very database of the query;
- every other relation is cut from the join and loaded after the rows, from the
  database(s) its rows live on: the keys grouped per database, one query per database
  (per batch of the database's parameter limit), with what ``select_related`` asked
  below it joined or loaded by the same rule there. The related object cache is set as
  the join would have set it, so ``card.board`` runs no query.

A key whose row is gone (a soft key is not enforced) keeps its row, and reading the
relation raises ``DoesNotExist`` as it does without ``select_related``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models
from django.db import router as db_router
from django.db.models import Prefetch

from ..compat import max_related_depth, select_related_request, set_operation
from ..routing import colocated, parent_link, sharded_pk

__all__ = [
    "Hop",
    "RelatedTree",
    "load_hops",
    "sharded_prefetches",
    "split_select_related",
    "stays_joined",
]

#: ``select_related``'s request: relation name -> what is asked below it.
RelatedTree = dict[str, "RelatedTree"]


@dataclass(frozen=True)
class Hop:
    """A relation ``select_related`` asked for whose rows may live on another database.

    ``path`` names the joined relations from the queried model to the model the hop
    starts from; ``below`` is what ``select_related`` asked beyond it.
    """

    path: tuple[str, ...]
    name: str
    below: RelatedTree = field(default_factory=dict)


def _lives_on_shards(model: Any) -> bool:
    return sharded_pk(model) is not None or parent_link(model) is not None


def _shard_databases(model: Any) -> tuple[str, ...]:
    """Every database rows of a model that lives on shards may be on."""
    pk = sharded_pk(model)
    if pk is None:
        link = parent_link(model)
        pk = sharded_pk(link.related_model) if link is not None else None
    return pk.placement.databases if pk is not None else ()


def _relation(model: type[models.Model], name: str) -> Any:
    """The forward key or reverse one-to-one ``select_related`` follows by ``name``."""
    try:
        found = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None  # a FilteredRelation, or a mistake Django reports itself
    if found.related_model is None or not (found.many_to_one or found.one_to_one):
        return None
    return found


def _places(link: Any) -> bool:
    """Whether ``link`` is the key that places its model's rows (a shard key, or the key
    a follower model lives with its parent by)."""
    owner = link.model
    pk = sharded_pk(owner)
    if pk is not None and pk.shard_key and pk.shard_key_field() is link:
        return True
    return bool(parent_link(owner) is link)


def stays_joined(model: type[models.Model], relation: Any, databases: Sequence[str]) -> bool:
    """Whether the rows ``relation`` reaches from rows of ``model`` read on ``databases``
    live on that same database, so a JOIN finds them.

    Rows on shards: only a co-located model, through the key that places the rows or a
    key with a database constraint (refused across databases, ``uid_fields.E011``). An
    ordinary model: when the routers read it from the very database of the query.
    """
    target = relation.related_model
    link = relation if relation.concrete else relation.field
    if _lives_on_shards(target):
        if not _lives_on_shards(model) or not colocated(model, target):
            return False
        return _places(link) or bool(getattr(link, "db_constraint", False))
    where = db_router.db_for_read(target)
    return bool(databases) and all(alias == where for alias in databases)


def requested_tree(queryset: models.QuerySet[Any]) -> RelatedTree:
    """What ``select_related`` asks of ``queryset``, with a bare ``select_related()``
    spelled out as Django reads it: every non-null forward key, ``max_depth`` deep."""
    request = select_related_request(queryset)
    if request is True:
        return _every_non_null_key(queryset.model, 1, max_related_depth(queryset))
    return request if isinstance(request, dict) else {}


def _every_non_null_key(model: Any, depth: int, limit: int) -> RelatedTree:
    if depth > limit:
        return {}
    return {
        f.name: _every_non_null_key(f.remote_field.model, depth + 1, limit)
        for f in model._meta.fields
        if f.is_relation
        and f.remote_field is not None
        and not getattr(f.remote_field, "parent_link", False)
        and not f.null
    }


def split_tree(
    model: type[models.Model],
    tree: RelatedTree,
    databases: Sequence[str],
    path: tuple[str, ...] = (),
) -> tuple[RelatedTree, list[Hop]]:
    """``tree`` cut in two: what stays a join on ``databases``, and the hops to load."""
    joined: RelatedTree = {}
    hops: list[Hop] = []
    for name, below in tree.items():
        relation = _relation(model, name)
        if relation is None:
            joined[name] = below  # not a key or one-to-one: Django decides (or refuses)
        elif stays_joined(model, relation, databases):
            joined[name], deeper = split_tree(
                relation.related_model, below, databases, (*path, name)
            )
            hops.extend(deeper)
        else:
            hops.append(Hop(path, name, below))
    return joined, hops


def _paths(tree: RelatedTree, prefix: str = "") -> list[str]:
    """``{"a": {"b": {}}, "c": {}}`` -> ``["a__b", "c"]``, as ``select_related`` takes them."""
    out: list[str] = []
    for name, below in tree.items():
        path = f"{prefix}{name}"
        out.extend(_paths(below, f"{path}__") if below else [path])
    return out


def with_tree(queryset: models.QuerySet[Any], tree: RelatedTree) -> models.QuerySet[Any]:
    """``queryset`` selecting only ``tree`` through joins."""
    cleared = queryset.select_related(None)
    return cleared.select_related(*_paths(tree)) if tree else cleared


def split_select_related(
    queryset: models.QuerySet[Any], databases: Callable[[], Sequence[str]]
) -> tuple[models.QuerySet[Any], list[Hop]]:
    """``queryset`` with only the joins that stay on ``databases()`` (asked only when
    something is selected), and the relations to load from their own databases after
    its rows (none: ``queryset`` itself)."""
    if set_operation(queryset) or not select_related_request(queryset):
        return queryset, []
    joined, hops = split_tree(queryset.model, requested_tree(queryset), databases())
    if not hops:
        return queryset, []
    return with_tree(queryset, joined), hops


# -- loading ------------------------------------------------------------------------------
def _cached(relation: Any, obj: models.Model) -> Any:
    return relation.get_cached_value(obj, None)


def _objects_at(rows: Iterable[models.Model], path: tuple[str, ...]) -> list[models.Model]:
    """The related objects the joins put at ``path`` below ``rows`` (missing ones skipped)."""
    current = [row for row in rows if row is not None]
    for name in path:
        found: list[models.Model] = []
        for obj in current:
            relation = _relation(type(obj), name)
            value = _cached(relation, obj) if relation is not None else None
            if value is not None:
                found.append(value)
        current = found
    return current


def load_hops(rows: Sequence[models.Model], hops: Sequence[Hop]) -> None:
    """Load every hop's related rows for ``rows`` from their own databases."""
    for hop in hops:
        sources = _objects_at(rows, hop.path)
        by_model: dict[type[models.Model], list[models.Model]] = {}
        for obj in sources:
            by_model.setdefault(type(obj), []).append(obj)
        for model, objs in by_model.items():
            relation = _relation(model, hop.name)
            if relation is not None:
                _load_relation(relation, objs, hop.below)


def _source_key(relation: Any) -> tuple[str, str]:
    """(the source's attribute holding the value, the target's attribute matching it)
    for a forward key or a reverse one-to-one."""
    if relation.concrete:
        return relation.attname, relation.target_field.attname
    key = relation.field  # the one-to-one on the target model
    return key.target_field.attname, key.attname


def _databases_for(relation: Any, obj: models.Model, value: Any) -> tuple[str, ...]:
    """Where the row(s) ``relation`` reaches from ``obj`` by ``value`` can live."""
    target = relation.related_model
    if not _lives_on_shards(target):
        return (db_router.db_for_read(target, instance=obj),)
    pk = sharded_pk(target)
    if pk is not None and relation.concrete and relation.target_field is target._meta.pk:
        try:
            return (pk.placement.database_of(value),)
        except (TypeError, ValueError):
            return ()  # an id no shard can hold matches no row
    return _shard_databases(target)


def _load_relation(relation: Any, objs: Sequence[models.Model], below: RelatedTree) -> None:
    source_attname, filter_name = _source_key(relation)
    target = relation.related_model
    groups: dict[str, dict[Any, None]] = {}
    for obj in objs:
        value = obj.__dict__.get(source_attname)  # a deferred key is left to be read lazily
        if value is None:
            continue
        for alias in _databases_for(relation, obj, value):
            groups.setdefault(alias, {})[value] = None
    found: dict[Any, models.Model] = {}
    for alias, values in groups.items():
        for loaded in _fetch(target, alias, filter_name, list(values), below):
            found[getattr(loaded, filter_name)] = loaded
    for obj in objs:
        if source_attname not in obj.__dict__:
            continue
        value = obj.__dict__[source_attname]
        row = found.get(value) if value is not None else None
        if relation.concrete:
            if row is None:
                continue  # a dangling soft key: reading it raises DoesNotExist, as before
            relation.set_cached_value(obj, row)
            if relation.unique:
                relation.remote_field.set_cached_value(row, obj)
        else:
            relation.set_cached_value(obj, row)  # None: "has no <name>", as the join says
            if row is not None:
                relation.field.set_cached_value(row, obj)


def _fetch(
    model: type[models.Model], alias: str, name: str, values: list[Any], below: RelatedTree
) -> list[models.Model]:
    """Rows of ``model`` on ``alias`` whose ``name`` is in ``values``, with ``below``
    joined there or loaded from its own databases."""
    joined, hops = split_tree(model, below, (alias,))
    base = with_tree(model._base_manager.db_manager(alias).all(), joined)
    size = connections[alias].features.max_query_params or len(values)
    rows: list[models.Model] = []
    for start in range(0, len(values), size):
        rows.extend(base.filter(**{f"{name}__in": values[start : start + size]}))
    load_hops(rows, hops)
    return rows


def sharded_prefetches(model: type[models.Model], lookups: Sequence[Any]) -> list[Any]:
    """``prefetch_related`` lookups with each forward key and reverse one-to-one to rows
    that may live on other shards read through the target's sharded manager.

    Django prefetches those through the target's ``_base_manager``, a plain manager,
    hinted with the first row: every target is read from the database that row's key
    names, so the targets of the other rows, on other shards, came back as missing
    (``RelatedObjectDoesNotExist``). A sharded queryset given the same hint fans out and
    its ``pk__in`` narrows it to the shards of the keys (``ShardedQuerySet._add_hints``).
    Reverse keys and many-to-many already go through the default manager's queryset.
    """
    out: list[Any] = []
    seen: set[str] = set()
    for lookup in lookups:
        if isinstance(lookup, str):
            path = lookup
        elif isinstance(lookup, Prefetch) and lookup.queryset is None and lookup.to_attr is None:
            path = lookup.prefetch_through
        else:
            out.append(lookup)
            continue
        replaced = False
        current: Any = model
        parts = path.split("__")
        for depth, name in enumerate(parts):
            relation = _prefetched_relation(current, name)
            if relation is None:
                break
            target = relation.related_model
            prefix = "__".join(parts[: depth + 1])
            if _lives_on_shards(target) and not stays_joined(current, relation, ()):
                if prefix not in seen:
                    seen.add(prefix)
                    out.append(Prefetch(prefix, queryset=target._default_manager.all()))
                replaced = replaced or prefix == path
            current = target
        if not replaced:
            out.append(lookup)
    return out


def _prefetched_relation(model: Any, name: str) -> Any:
    """The relation ``name`` of ``model`` when it is one a prefetch follows to one row
    (a forward key or a one-to-one either way), else None."""
    try:
        found = model._meta.get_field(name)
    except (FieldDoesNotExist, AttributeError):
        return None  # a GenericForeignKey or a to_attr: Django's own prefetch
    if not isinstance(found.related_model, type):
        return None
    return found
