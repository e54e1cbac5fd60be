"""Every private Django API the adapter touches, in one place.

A sharded QuerySet has to work below Django's public surface: it overrides QuerySet
hooks (``_fetch_all``, ``_chain``, ``_clone`` ...), reads the query's limits and ordering,
and names the iterable classes behind ``values()``/``values_list()``. Deletes across
databases subclass Django's deletion ``Collector`` (and the admin's ``NestedObjects``)
and put the subclass where ``Model.delete()``, ``QuerySet.delete()`` and the admin's
delete confirmation look it up. Those names are not public and can change in any
release; they are listed and reached here, so a new Django is checked in one place
(``tests/django/test_compat.py`` fails on the first one missing).
"""

from __future__ import annotations

import importlib
import inspect
import operator
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import EmptyResultSet
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
    "PAGES_BUILT_ONCE",
    "PRIVATE_COLLECTOR_API",
    "PRIVATE_QUERYSET_API",
    "PRIVATE_QUERY_API",
    "Collector",
    "CompiledSelect",
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
    "prepared_for_delete",
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
)

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

#: Where the admin's delete confirmation (``get_deleted_objects``) looks up the
#: collector that lists what a delete takes with it.
NESTED_OBJECTS_HOME = "django.contrib.admin.utils"


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


#: Whether ``ModelIterable`` builds rows as ``CompiledSelect.models`` repeats (Django
#: 5.2 and 6.0: related populators of (klass_info, select, db), no fetch mode).
_PLAIN_POPULATORS = len(inspect.signature(get_related_populators).parameters) == 3

#: Whether a fan-out page is compiled once and builds only the rows it returns
#: (``CompiledSelect``); on Django 6.1 (fetch modes) each shard's rows are built by
#: Django's own ``ModelIterable``, as before.
PAGES_BUILT_ONCE = _PLAIN_POPULATORS


class CompiledSelect:
    """A model query's SQL compiled once, for every database of one backend: run it
    raw on each (``fetch``), then build model instances of only the rows kept
    (``models``), as ``ModelIterable`` would for each row's own database.

    ``ModelIterable`` compiles the query on every database it reads and builds every
    row it fetches; a fan-out's page of 20 over 8 shards would compile 8 times and
    build 160 models to keep 20. The compiler's ``select``/``klass_info`` say where
    the model's fields, the ``select_related`` rows and the annotations sit in a row.
    """

    def __init__(self, queryset: models.QuerySet[Any], compiler: Any, sql: str, params: Any):
        self.queryset = queryset
        self.compiler = compiler
        self.sql = sql
        self.params = tuple(params)
        info = compiler.klass_info
        fields = info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [f[0].target.attname for f in compiler.select[self.start : self.end]]

    @classmethod
    def of(cls, queryset: models.QuerySet[Any], alias: str) -> CompiledSelect | None:
        """The query compiled for ``alias``'s backend; None when it needs no database
        (an empty ``pk__in``, ``none()``) or selects no model, and on a Django whose
        ``ModelIterable`` loop is not the one repeated here (6.1's fetch modes)."""
        if not _PLAIN_POPULATORS:
            return None
        compiler = queryset.query.get_compiler(using=alias)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:
            return None
        if not compiler.klass_info:
            return None
        return cls(queryset, compiler, sql, params)

    def position(self, attname: str) -> int | None:
        """Where the model's field ``attname`` sits in a row (None: not selected)."""
        for index, name in enumerate(self.init_list, self.start):
            if name == attname:
                return index
        return None

    def fetch(self, alias: str) -> list[tuple[Any, ...]]:
        """The rows of ``alias``'s database, converted as Django converts them, on this
        thread's connection to it."""
        with connections[alias].cursor() as cursor:
            cursor.execute(self.sql, self.params)
            return self.converted(cursor.fetchall())

    def converted(self, rows: list[Any]) -> list[tuple[Any, ...]]:
        """Rows as the driver returned them, converted as Django converts them."""
        compiler = self.compiler
        if compiler.has_extra_select:
            rows = [row[: compiler.col_count] for row in rows]
        return list(compiler.results_iter(results=[rows], tuple_expected=True))

    def models(self, rows: Iterable[tuple[str, tuple[Any, ...]]]) -> list[models.Model]:
        """Model instances of ``(database, row)`` pairs: ``ModelIterable``'s loop, with
        the database of each row rather than one for all."""
        compiler, queryset = self.compiler, self.queryset
        info, select = compiler.klass_info, compiler.select
        model_cls = info["model"]
        annotations = compiler.annotation_col_map
        populators: dict[str, list[Any]] = {}
        known = [
            (
                field,
                objects,
                operator.attrgetter(
                    *[
                        field.attname
                        if source == "self"
                        else queryset.model._meta.get_field(source).attname
                        for source in field.from_fields
                    ]
                ),
            )
            for field, objects in queryset._known_related_objects.items()  # type: ignore[attr-defined]
        ]
        built = []
        for db, row in rows:
            obj = model_cls.from_db(db, self.init_list, row[self.start : self.end])
            if db not in populators:
                populators[db] = get_related_populators(info, select, db)  # type: ignore[call-arg,unused-ignore]
            for populator in populators[db]:
                populator.populate(row, obj)
            for name, column in (annotations or {}).items():
                setattr(obj, name, row[column])
            for field, objects, key_of in known:
                if not field.is_cached(obj):
                    found = objects.get(key_of(obj))
                    if found is not None:
                        setattr(obj, field.name, found)
            built.append(obj)
        return built


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


# -- what a fan-out planner reads of a query (uid_fields.django.plans) -------------------


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
