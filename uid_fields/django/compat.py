"""Every private Django API the adapter touches, in one place.

A sharded QuerySet has to work below Django's public surface: it overrides QuerySet
hooks (``_fetch_all``, ``_chain``, ``_clone`` ...), reads the query's limits and ordering,
and names the iterable classes behind ``values()``/``values_list()``. Deletes across
databases subclass Django's deletion ``Collector`` (and the admin's ``NestedObjects``)
and put the subclass where ``Model.delete()``, ``QuerySet.delete()`` and the admin's
delete confirmation look it up. Those names are not public and can change in any
release; they are listed and reached here, so a new Django is checked in one place
(``tests/django/test_compat.py`` fails on the first one missing).

The lists: ``PRIVATE_QUERYSET_API``, ``PRIVATE_QUERY_API``, ``PRIVATE_COLLECTOR_API``,
``PRIVATE_MANAGER_API`` (``Manager._queryset_class``), ``PRIVATE_OUTPUT_API``
(``OutputWrapper._out``, the stream a command writes to) and ``PRIVATE_CONNECTIONS_API``
(the connection handler's per-thread storage); ``PRIVATE_API`` is all of them. The rest
of the adapter reaches none of these names itself: it calls the functions here
(``explicit_database(qs)`` rather than ``qs._db``), and a test reads its source to hold
it so. Two kinds of underscore names stay outside:

- ``OVERRIDDEN_QUERYSET_HOOKS``: the QuerySet methods ``ShardedQuerySet`` overrides
  (``def _fetch_all`` and its ``super()._fetch_all()``), which no function can do for
  a subclass; they are on ``PRIVATE_QUERYSET_API`` too, so a rename fails here.
- ``DOCUMENTED_UNDERSCORE_API``: ``Model._meta`` (the "Model _meta API" reference),
  ``Model._state`` (``_state.adding`` and ``_state.db``, in the model instance
  reference), ``Model._default_manager`` and ``Model._base_manager`` (the managers
  topic). Django documents them and keeps them as public API despite the underscore
  (named so to stay clear of field names).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor
from django.db.models import BooleanField
from django.db.models import aggregates as aggregates_module
from django.db.models import base as model_base
from django.db.models import query as query_module
from django.db.models.deletion import Collector, get_candidate_relations_to_delete
from django.db.models.expressions import RawSQL
from django.db.models.query import (
    FlatValuesListIterable,
    ModelIterable,
    NamedValuesListIterable,
    ValuesIterable,
    get_related_populators,
)
from django.db.models.sql import Query
from django.db.models.sql.where import WhereNode

#: Django 6.0+ wraps an aggregate's ``filter=`` in an expression of its own (None: 5.2).
_AggregateFilter: Any = getattr(aggregates_module, "AggregateFilter", None)

__all__ = [
    "DOCUMENTED_UNDERSCORE_API",
    "OVERRIDDEN_QUERYSET_HOOKS",
    "PAGES_BUILT_ONCE",
    "PRIVATE_API",
    "PRIVATE_COLLECTOR_API",
    "PRIVATE_COMPILER_API",
    "PRIVATE_CONNECTIONS_API",
    "PRIVATE_MANAGER_API",
    "PRIVATE_OUTPUT_API",
    "PRIVATE_QUERYSET_API",
    "PRIVATE_QUERY_API",
    "Collector",
    "FlatValuesListIterable",
    "ModelIterable",
    "NamedValuesListIterable",
    "ValuesIterable",
    "assign_generic_target",
    "cache_related",
    "candidate_relations_to_delete",
    "install_collector",
    "install_nested_objects",
    "iterable_class",
    "lent_connection",
    "max_related_depth",
    "migration_progress",
    "prefetch_lookups",
    "prepared_for_delete",
    "related_populators",
    "select_related_request",
    "selected_names",
    "where_sql",
]

#: QuerySet hooks and attributes the sharded QuerySet overrides or reads.
PRIVATE_QUERYSET_API = (
    "_chain",
    "_clone",
    "_fetch_all",
    "_filter_or_exclude_inplace",
    "_result_cache",
    "_iterable_class",
    "_fields",
    "_db",
    "_for_write",
    "_add_hints",
    "_insert",
    "_raw_delete",
    "_extract_model_params",
    "_known_related_objects",
    "_prefetch_related_lookups",
)

#: The QuerySet hooks ``ShardedQuerySet`` overrides: defined (and ``super()``-called) in
#: its class, the one private use outside this module.
OVERRIDDEN_QUERYSET_HOOKS = ("_clone", "_fetch_all", "_filter_or_exclude_inplace", "_add_hints")

#: Underscore names Django documents as API (see the module docstring).
DOCUMENTED_UNDERSCORE_API = ("_meta", "_state", "_default_manager", "_base_manager")

#: ``sql.Query`` attributes and methods the sharded QuerySet reads or calls.
PRIVATE_QUERY_API = (
    "low_mark",
    "high_mark",
    "set_limits",
    "clear_limits",
    "set_empty",
    "order_by",
    "default_ordering",
    "standard_ordering",
    "group_by",
    "distinct",
    "distinct_fields",
    "combinator",
    "select_for_update",
    "alias_map",
    "alias_refcount",
    "base_table",
    "annotations",
    "annotation_select",
    "values_select",
    "select",
    "where",
    "external_aliases",
    "add_annotation",
    "clear_select_fields",
    "set_annotation_mask",
    "select_related",
    "max_depth",
)

#: ``Collector`` methods and attributes the deletes across databases override or read.
PRIVATE_COLLECTOR_API = (
    "collect",
    "related_objects",
    "delete",
    "data",
    "fast_deletes",
    "restricted_objects",
    "get_del_batches",
    "clear_restricted_objects_from_set",
    "clear_restricted_objects_from_queryset",
)

#: ``Manager`` attributes the checks read (the QuerySet class a manager makes).
PRIVATE_MANAGER_API = ("_queryset_class",)

#: ``OutputWrapper`` attributes a management command reads (the stream it wraps).
PRIVATE_OUTPUT_API = ("_out",)

#: ``ConnectionHandler`` attributes ``borrowed_connection`` reads (per-thread storage).
PRIVATE_CONNECTIONS_API = ("_connections",)

#: Where the admin's delete confirmation (``get_deleted_objects``) looks up the
#: collector that lists what a delete takes with it.
NESTED_OBJECTS_HOME = "django.contrib.admin.utils"


#: The compiler's attributes ``query.compiled.CompiledSelect`` reads to build rows as
#: ``ModelIterable`` does: where the model's fields, ``select_related`` rows and
#: annotations sit in a row, and Django's conversion of raw rows.
PRIVATE_COMPILER_API = (
    "klass_info",
    "select",
    "annotation_col_map",
    "has_extra_select",
    "col_count",
    "results_iter",
)

#: Every private name on the lists above.
PRIVATE_API = (
    PRIVATE_QUERYSET_API
    + PRIVATE_QUERY_API
    + PRIVATE_COLLECTOR_API
    + PRIVATE_MANAGER_API
    + PRIVATE_OUTPUT_API
    + PRIVATE_CONNECTIONS_API
    + PRIVATE_COMPILER_API
)


# -- a QuerySet's private state, read and set --------------------------------------------


def prefetch_lookups(queryset: models.QuerySet[Any]) -> tuple[Any, ...]:
    """The ``prefetch_related()`` lookups of ``queryset`` (run when it is evaluated)."""
    return tuple(queryset._prefetch_related_lookups)  # type: ignore[attr-defined]


def explicit_database(queryset: models.QuerySet[Any]) -> str | None:
    """The database ``using()`` (or a related manager, or a write) pinned, else None."""
    alias: str | None = queryset._db  # type: ignore[attr-defined]
    return alias


def set_explicit_database(queryset: models.QuerySet[Any], alias: str | None) -> None:
    """Pin ``queryset`` (a fresh clone) to ``alias``, as ``using()`` does; None unpins."""
    queryset._db = alias  # type: ignore[attr-defined]


def is_for_write(queryset: models.QuerySet[Any]) -> bool:
    """Whether the QuerySet routes as a write (``db`` asks ``db_for_write``)."""
    return bool(queryset._for_write)  # type: ignore[attr-defined]


def mark_for_write(queryset: models.QuerySet[Any]) -> None:
    """Route ``queryset`` as a write from now on, as ``update()`` and ``create()`` do."""
    queryset._for_write = True  # type: ignore[attr-defined]


def result_cache(queryset: models.QuerySet[Any]) -> list[Any] | None:
    """The rows the QuerySet has fetched, None before it ran."""
    rows: list[Any] | None = queryset._result_cache
    return rows


def set_result_cache(queryset: models.QuerySet[Any], rows: list[Any] | None) -> None:
    """Make ``rows`` what the QuerySet has fetched (None: fetch again when read)."""
    queryset._result_cache = rows


def set_iterable_class(queryset: models.QuerySet[Any], iterable: type) -> None:
    """Make the QuerySet yield through ``iterable`` (a ``ModelIterable`` subclass)."""
    queryset._iterable_class = iterable


def chained(queryset: models.QuerySet[Any]) -> Any:
    """A copy of ``queryset`` to change, as each QuerySet method makes one."""
    return queryset._chain()  # type: ignore[attr-defined]


def model_params(queryset: models.QuerySet[Any], defaults: Any, **kwargs: Any) -> dict[str, Any]:
    """The field values ``get_or_create``/``update_or_create`` create a row with (the
    lookups without ``__``, then ``defaults``), refused as Django refuses them."""
    params: dict[str, Any] = queryset._extract_model_params(defaults, **kwargs)  # type: ignore[attr-defined]
    return params


def known_related_objects(queryset: models.QuerySet[Any]) -> dict[Any, dict[Any, Any]]:
    """The objects a related manager's QuerySet hands each row it builds (``{field:
    {key: object}}``: ``author.books.all()`` rows know their author)."""
    known: dict[Any, dict[Any, Any]] = queryset._known_related_objects  # type: ignore[attr-defined]
    return known


def raw_insert(manager: Any, objs: list[Any], fields: list[Any], using: str) -> None:
    """An INSERT of ``objs`` as ``loaddata`` makes it: the values as they are, no
    ``pre_save``, no signals."""
    manager._insert(objs, fields=fields, using=using, raw=True)


def raw_delete(queryset: models.QuerySet[Any], using: str) -> None:
    """A DELETE of the QuerySet's rows: no signals, no cascade, no collector."""
    queryset._raw_delete(using)


def is_queryset_like(objs: Any) -> bool:
    """Whether Django's ``Collector`` takes ``objs`` for a QuerySet (it asks for a
    ``_raw_delete``) rather than a list of instances."""
    return hasattr(objs, "_raw_delete")


def queryset_class(manager: Any) -> type:
    """The QuerySet class ``manager`` makes (``Manager.from_queryset``'s)."""
    made: type = manager._queryset_class
    return made


def wrapped_stream(output: Any) -> Any:
    """The stream a command's ``OutputWrapper`` writes to (``sys.stdout`` or
    ``call_command``'s ``stdout=``)."""
    return output._out


def iterable_class(queryset: models.QuerySet[Any]) -> type:
    """What the QuerySet yields: models, dicts (``values()``), tuples or flat values."""
    return queryset._iterable_class


def selected_names(queryset: models.QuerySet[Any]) -> list[str]:
    """The names given to ``values()``/``values_list()`` (empty: every field)."""
    return list(queryset._fields or ())  # type: ignore[attr-defined]


def where_sql(queryset: models.QuerySet[Any], sql: str) -> models.QuerySet[Any]:
    """``queryset`` narrowed by a raw SQL condition (what ``extra(where=[...])`` did,
    without the API Django plans to deprecate). The SQL goes through the driver's
    %-formatting, so a modulo in it is written ``%%``."""
    return queryset.filter(RawSQL(sql.replace("%", "%%"), (), output_field=BooleanField()))


def select_related_request(queryset: models.QuerySet[Any]) -> bool | dict[str, Any]:
    """What ``select_related`` asked: False, True (every non-null key) or the nested
    dict of names (``{"board": {"owner": {}}}``)."""
    request: bool | dict[str, Any] = queryset.query.select_related
    return request


def max_related_depth(queryset: models.QuerySet[Any]) -> int:
    """How deep a bare ``select_related()`` follows keys."""
    return int(queryset.query.max_depth)


def candidate_relations_to_delete(model: type[models.Model]) -> Any:
    """The relations whose on_delete a delete of ``model``'s rows runs (Django's list)."""
    return get_candidate_relations_to_delete(model._meta)


def cache_related(field: Any, row: models.Model, value: models.Model) -> None:
    """``row.<field>`` is ``value`` from now on, without a query."""
    field.set_cached_value(row, value)


def prepared_for_delete(queryset: models.QuerySet[Any]) -> models.QuerySet[Any]:
    """``queryset`` as ``QuerySet.delete()`` collects it: refused where Django refuses
    (a slice, ``distinct(*fields)``, ``values()``), for writing, without ordering,
    ``select_related`` or ``select_for_update``."""
    query = queryset.query
    if query.is_sliced:
        raise TypeError("Cannot use 'limit' or 'offset' with delete().")
    if query.distinct_fields:
        raise TypeError("Cannot call delete() after .distinct(*fields).")
    if queryset._fields is not None:  # type: ignore[attr-defined]
        raise TypeError("Cannot call delete() after .values() or .values_list()")
    prepared = queryset._chain()  # type: ignore[attr-defined]
    prepared._for_write = True
    prepared.query.select_for_update = False
    prepared.query.select_related = False
    prepared.query.clear_ordering(force=True)
    return prepared  # type: ignore[no-any-return]


def install_collector(collector: type[Collector]) -> None:
    """Make ``Model.delete()`` and ``QuerySet.delete()`` collect with ``collector`` (a
    subclass that behaves as Django's own when a delete stays on one database)."""
    if not issubclass(collector, Collector):
        raise TypeError(f"{collector!r} is not a django.db.models.deletion.Collector")
    for module in (model_base, query_module):
        module.Collector = collector  # type: ignore[attr-defined]


def install_nested_objects(nested: type) -> None:
    """Make the admin's delete confirmation list rows with ``nested`` (a subclass of
    ``NestedObjects``); ``get_deleted_objects`` reads the name when it runs."""
    sys.modules[NESTED_OBJECTS_HOME].NestedObjects = nested  # type: ignore[attr-defined]


#: A migration by its app label and name, as Django's migration graph keys it.
MigrationKey = tuple[str, str]


def migration_progress(
    connection: BaseDatabaseWrapper,
) -> tuple[set[MigrationKey], list[MigrationKey], dict[MigrationKey, set[MigrationKey]]]:
    """What ``migrate`` sees on one database (the executor and loader are not public API).

    The migrations on disk that the database has applied, the ones it lacks in the
    order ``migrate`` would apply them (to every leaf of the graph), and each
    migration's parents (its dependencies). Applied rows of migrations no longer on disk
    are left out; squashed migrations count as applied when what they replace is.
    """
    executor = MigrationExecutor(connection)
    graph = executor.loader.graph
    applied = {key for key in executor.loader.applied_migrations if key in graph.nodes}
    plan = [
        (migration.app_label, migration.name)
        for migration, backwards in executor.migration_plan(graph.leaf_nodes())
        if not backwards
    ]
    parents = {key: {parent.key for parent in node.parents} for key, node in graph.node_map.items()}
    return applied, plan, parents


def assign_generic_target(field: Any, instance: models.Model, value: Any) -> None:
    """Django's assignment of a generic foreign key's target (sets the content type and
    the object id): on the field until Django 6.0, on its descriptor class from 6.1."""
    # contenttypes imports its models: read it at call time, once apps are ready
    fields = importlib.import_module("django.contrib.contenttypes.fields")
    descriptor = getattr(fields, "GenericForeignKeyDescriptor", None)  # Django 6.1+
    if descriptor is not None:
        descriptor(field).__set__(instance, value)
    else:
        fields.GenericForeignKey.__set__(field, instance, value)


#: Whether ``ModelIterable`` builds rows as a fan-out page repeats it (Django 5.2 and 6.0:
#: related populators of (klass_info, select, db), no fetch mode).
_PLAIN_POPULATORS = len(inspect.signature(get_related_populators).parameters) == 3

#: Whether a fan-out page may be compiled once and build only the rows it returns
#: (``query.compiled.CompiledSelect``); on Django 6.1 (fetch modes) each shard's rows are built
#: by Django's own ``ModelIterable``, as before.
PAGES_BUILT_ONCE = _PLAIN_POPULATORS


def related_populators(klass_info: Any, select: Any, db: str) -> list[Any]:
    """The populators ``ModelIterable`` fills ``select_related`` objects of a row with,
    for a row of ``db`` (Django 5.2/6.0's signature; see ``PAGES_BUILT_ONCE``)."""
    populators: list[Any] = get_related_populators(klass_info, select, db)  # type: ignore[call-arg,unused-ignore]
    return populators


@contextmanager
def borrowed_connection(alias: str, wrapper: BaseDatabaseWrapper) -> Iterator[None]:
    """In this thread, ``connections[alias]`` is ``wrapper`` (another thread's connection,
    shared with ``inc_thread_sharing()``) for the block; then this thread's own again.

    Django keeps connections per thread; ``LiveServerThread`` hands the test thread's
    connections to the server thread the same way. The thread's own wrapper, if it had
    one, is read from the handler's private per-thread storage so it is not replaced by
    a new one (or closed) when the block ends.
    """
    own = getattr(connections._connections, alias, None)  # type: ignore[attr-defined]
    connections[alias] = wrapper
    try:
        yield
    finally:
        if own is None:
            del connections[alias]
        else:
            connections[alias] = own


# -- what a fan-out planner reads of a query (uid_fields.django.query.plans) ---------------


def set_operation(queryset: models.QuerySet[Any]) -> str | None:
    """``union``, ``intersection`` or ``difference`` when the query is one, else None."""
    combinator: str | None = queryset.query.combinator
    return combinator


def distinct_on(queryset: models.QuerySet[Any]) -> tuple[Any, ...]:
    """The fields of ``distinct(*fields)`` (DISTINCT ON); empty for a plain DISTINCT."""
    return tuple(queryset.query.distinct_fields)


def locks_rows(queryset: models.QuerySet[Any]) -> bool:
    """Whether the query was made by ``select_for_update()``."""
    return bool(queryset.query.select_for_update)


def all_annotations(query: Any) -> dict[str, Any]:
    """Every annotation of a ``sql.Query`` (selected or not, as ``alias()`` adds them),
    resolved."""
    return dict(query.annotations)


def selected_annotations(queryset: models.QuerySet[Any]) -> dict[str, Any]:
    """The annotations the query selects, in the order Django returns them."""
    return dict(queryset.query.annotation_select)


def selected_values(queryset: models.QuerySet[Any]) -> tuple[str, ...]:
    """The field names of ``values()``/``values_list()`` the query selects (not the
    annotations), in order."""
    return tuple(queryset.query.values_select)


def selected_columns(queryset: models.QuerySet[Any]) -> tuple[Any, ...]:
    """The columns of ``selected_values``, in the same order."""
    return tuple(queryset.query.select)


def grouping(queryset: models.QuerySet[Any]) -> Any:
    """The query's GROUP BY: None, True (every selected column) or a tuple of
    expressions."""
    return queryset.query.group_by


def where_of(query: Any) -> Any:
    """The WHERE tree of a ``sql.Query``."""
    return query.where


def having_of(queryset: models.QuerySet[Any]) -> Any:
    """The part of the query's filters that SQL puts in HAVING (they name an aggregate),
    None when there is none; the split Django's compiler makes."""
    query = queryset.query
    _where, having, _qualify = query.where.split_having_qualify(
        must_group_by=query.group_by is not None
    )
    return having


def joined_tables(query: Any) -> list[str]:
    """The tables a ``sql.Query`` reads (its FROM and JOINs): the aliases its SQL uses
    (a join set up and then trimmed, as a filter rewritten to keys leaves, is in
    ``alias_map`` with no reference and is not in the SQL, as the compiler skips it)."""
    refcount = query.alias_refcount
    return [
        join.table_name
        for alias, join in query.alias_map.items()
        if refcount.get(alias, 1) or alias == query.base_table
    ]


def base_alias(queryset: models.QuerySet[Any]) -> str | None:
    """The alias of the table the query selects from (its FROM)."""
    alias: str | None = queryset.query.base_table
    return alias


def outer_aliases(query: Any) -> set[str]:
    """The table aliases a subquery's ``sql.Query`` refers to in its outer query."""
    return set(query.external_aliases)


def query_model(query: Any) -> Any:
    """The model a ``sql.Query`` selects from."""
    return query.model


def query_is_sliced(query: Any) -> bool:
    return bool(query.is_sliced)


def query_selected(query: Any) -> tuple[Any, ...]:
    """What a subquery selects (its columns, else its selected annotations)."""
    return tuple(query.select) or tuple(query.annotation_select.values())


def is_sql_query(value: Any) -> bool:
    """Whether ``value`` is a ``sql.Query`` (``__in=<queryset>`` resolves to one)."""
    return isinstance(value, Query)


def ordering_request(queryset: models.QuerySet[Any]) -> tuple[list[Any], bool]:
    """The ordering the query asked (``order_by()``, else the model's ``Meta.ordering``
    unless ``order_by()`` cleared it) and whether it runs as written (False after
    ``reverse()``)."""
    query = queryset.query
    ordering = list(query.order_by)
    if not ordering and query.default_ordering:
        ordering = list(queryset.model._meta.ordering)
    return ordering, bool(query.standard_ordering)


def limits(queryset: models.QuerySet[Any]) -> tuple[int, int | None]:
    """The slice ``[low:high]`` of the query."""
    return int(queryset.query.low_mark), queryset.query.high_mark


def reslice(queryset: models.QuerySet[Any], high: int | None) -> None:
    """Replace the slice of ``queryset`` (a fresh clone) by ``[:high]`` (None: none)."""
    queryset.query.clear_limits()
    if high is not None:
        queryset.query.set_limits(0, high)


def explicitly_ordered(queryset: models.QuerySet[Any]) -> bool:
    """Whether the query has an ordering of its own (``order_by()``, or the model's
    ``Meta.ordering`` that ``order_by()`` did not clear)."""
    query = queryset.query
    return bool(query.order_by) or bool(queryset.model._meta.ordering and query.default_ordering)


def is_distinct(queryset: models.QuerySet[Any]) -> bool:
    """Whether the query is ``distinct()`` (with or without fields)."""
    return bool(queryset.query.distinct)


def has_order_by(queryset: models.QuerySet[Any]) -> bool:
    """Whether ``order_by()`` named an ordering (the model's ``Meta.ordering`` aside)."""
    return bool(queryset.query.order_by)


def match_nothing(queryset: models.QuerySet[Any]) -> None:
    """Make ``queryset`` (a fresh clone) match no row, as ``none()`` does."""
    queryset.query.set_empty()


def limited(queryset: models.QuerySet[Any], high: int | None) -> models.QuerySet[Any]:
    """``queryset`` with its slice replaced by ``[:high]`` (None: no slice)."""
    clone = queryset._chain()  # type: ignore[attr-defined]
    clone.query.clear_limits()
    if high is not None:
        clone.query.set_limits(0, high)
    return clone  # type: ignore[no-any-return]


def with_annotations(
    queryset: models.QuerySet[Any], expressions: dict[str, Any]
) -> tuple[models.QuerySet[Any], dict[str, Any]]:
    """``expressions`` resolved against a copy of the query, as ``aggregate()`` resolves
    them (their output fields known, their filters turned into conditions)."""
    clone = queryset._chain()  # type: ignore[attr-defined]
    for alias, expression in expressions.items():
        clone.query.add_annotation(expression, alias, select=True)
    return clone, {alias: clone.query.annotations[alias] for alias in expressions}


def shard_base(queryset: models.QuerySet[Any], dropped: Iterable[str]) -> models.QuerySet[Any]:
    """The query with only what each shard of a grouped plan keeps: its WHERE (without
    the HAVING part), its joins and its non-aggregate annotations; no ordering, slice,
    GROUP BY, DISTINCT, selected values or the annotations ``dropped`` (aggregates the
    plan asks per shard in another form). ``values()``/``annotate()`` build each shard's
    select on it."""
    clone = queryset._chain()  # type: ignore[attr-defined]
    query = clone.query
    where, _having, _qualify = query.where.split_having_qualify(
        must_group_by=query.group_by is not None
    )
    query.where = where if where is not None else WhereNode()
    kept = [name for name in query.annotation_select if name not in set(dropped)]
    for name in dropped:
        query.annotations.pop(name, None)
    query.clear_ordering(force=True)
    query.clear_limits()
    query.group_by = None
    query.distinct = False
    query.clear_select_fields()
    query.default_cols = True
    query.set_annotation_mask(kept)
    clone._fields = None
    clone._iterable_class = ModelIterable
    return clone  # type: ignore[no-any-return]


def converted(expression: Any, value: Any, alias: str) -> Any:
    """``value`` of ``expression`` as Django hands it back from ``alias``'s database: the
    backend's converters, then the expression's own (an Avg of an integer column is a
    float, of a DecimalField a Decimal)."""
    connection = connections[alias]
    converters = connection.ops.get_db_converters(expression)
    converters += expression.get_db_converters(connection)
    for converter in converters:
        value = converter(value, expression, connection)
    return value


def aggregate_filter(aggregate: Any) -> Any:
    """The condition of an aggregate's ``filter=`` (None without one). Django 6.0 keeps
    it wrapped in an ``AggregateFilter`` expression that renders its own ``FILTER (WHERE
    ...)``: passed on as ``filter=`` it would be wrapped, and rendered, twice."""
    found = getattr(aggregate, "filter", None)
    if _AggregateFilter is not None and isinstance(found, _AggregateFilter):
        return found.condition
    return found


def aggregate_argument(aggregate: Any) -> Any:
    """An aggregate's (first) argument: its first source expression in every Django."""
    return aggregate.get_source_expressions()[0]


@contextmanager
def lent_connection(alias: str, connection: BaseDatabaseWrapper) -> Iterator[None]:
    """``connections[alias]`` in this thread is ``connection``, another thread's, for
    the block: Django's thread sharing (``inc_thread_sharing``, as its live test server
    lends a test's connection), this thread's own wrapper put back after. The owner
    must not use the connection meanwhile."""
    own = connections[alias]
    connection.inc_thread_sharing()
    connections[alias] = connection
    try:
        yield
    finally:
        connections[alias] = own
        connection.dec_thread_sharing()
