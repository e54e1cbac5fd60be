"""Every private Django API the adapter touches, in one place.

A sharded QuerySet has to work below Django's public surface: it overrides QuerySet
hooks (``_fetch_all``, ``_chain``, ``_clone`` ...), reads the query's limits and ordering,
and names the iterable classes behind ``values()``/``values_list()``. Those names are not
public and can change in any release; they are listed and reached here, so a new Django
is checked in one place (``tests/django/test_compat.py`` fails on the first one missing).
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.db.models.query import (
    FlatValuesListIterable,
    ModelIterable,
    NamedValuesListIterable,
    ValuesIterable,
)

__all__ = [
    "PRIVATE_QUERYSET_API",
    "PRIVATE_QUERY_API",
    "FlatValuesListIterable",
    "ModelIterable",
    "NamedValuesListIterable",
    "ValuesIterable",
    "asked_by_model_delete",
    "iterable_class",
    "migration_progress",
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
    "combinator",
    "alias_map",
)


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


#: ``Model.delete``: it asks the router where a row is (``db_for_write``) and then runs
#: Django's Collector, in a transaction of its own and with no signal before it.
MODEL_DELETE_CODE = models.Model.delete.__code__


def asked_by_model_delete(depth: int = 5) -> bool:
    """Whether the router is being asked by ``Model.delete`` (within ``depth`` frames of
    the caller): the only moment a row's delete can be checked before it runs."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code is MODEL_DELETE_CODE:
            return True
        frame = frame.f_back
    return False
