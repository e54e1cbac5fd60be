"""The private Django API the adapter relies on exists in the installed Django: a release
that renames one fails here, by name, instead of somewhere inside a fan-out."""

from __future__ import annotations

import io

import pytest
from django.core.management.base import OutputWrapper
from django.db import connections
from django.db.models.sql import Query

from tests import private_api
from tests.django.testapp.models import Ranked
from uid_fields.django import compat

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


@pytest.mark.parametrize("name", compat.PRIVATE_QUERYSET_API)
def test_each_private_queryset_name_exists(name: str) -> None:
    queryset = Ranked.objects.all()
    assert hasattr(queryset, name), f"QuerySet.{name} is gone: update uid_fields/django/compat.py"


@pytest.mark.parametrize("name", compat.PRIVATE_QUERY_API)
def test_each_private_query_name_exists(name: str) -> None:
    assert hasattr(Query(Ranked), name), f"Query.{name} is gone: update compat.py"


def test_the_readers_see_values_and_fields() -> None:
    assert issubclass(compat.iterable_class(Ranked.objects.all()), compat.ModelIterable)
    values = Ranked.objects.values("pk", "name")
    assert compat.iterable_class(values) is compat.ValuesIterable
    assert compat.selected_names(values) == ["pk", "name"]
    flat = Ranked.objects.values_list("pk", flat=True)
    assert compat.iterable_class(flat) is compat.FlatValuesListIterable


def test_a_raw_condition_narrows_on_the_database() -> None:
    """What ``extra(where=...)`` did, with a modulo in the SQL."""
    rows = [Ranked(bucket=1, rank=rank, name="x") for rank in range(6)]
    Ranked.objects.bulk_create(rows)
    alias = rows[0]._state.db
    plain = Ranked.objects.using(alias)
    odd = compat.where_sql(plain, "rank % 2 = 1")
    assert sorted(r.rank for r in odd) == [1, 3, 5]


@pytest.mark.parametrize("name", compat.PRIVATE_COLLECTOR_API)
def test_each_private_collector_name_exists(name: str) -> None:
    collector = compat.Collector(using="default")
    assert hasattr(collector, name), f"Collector.{name} is gone: update compat.py"


def test_deletes_and_the_admin_collect_with_the_sharded_collectors() -> None:
    """Model.delete(), QuerySet.delete() and get_deleted_objects read these names when
    they run: the app put its subclasses there when it was ready."""
    from django.contrib.admin import utils as admin_utils
    from django.db.models import base, query

    from uid_fields.django.admin import ShardedNestedObjects
    from uid_fields.django.relations.deletion import ShardedCollector

    assert base.Collector is ShardedCollector and query.Collector is ShardedCollector
    assert admin_utils.NestedObjects is ShardedNestedObjects
    with pytest.raises(TypeError, match=r"not a django\.db\.models\.deletion\.Collector"):
        compat.install_collector(object)  # type: ignore[arg-type]


def test_a_prepared_delete_refuses_what_django_refuses() -> None:
    with pytest.raises(TypeError, match="limit"):
        compat.prepared_for_delete(Ranked.objects.using("shard_0")[:2])
    with pytest.raises(TypeError, match="values"):
        compat.prepared_for_delete(Ranked.objects.using("shard_0").values("pk"))
    prepared = compat.prepared_for_delete(Ranked.objects.using("shard_0").order_by("name"))
    assert prepared._for_write and not prepared.query.order_by  # type: ignore[attr-defined]


#: The adapter's own private names that Django's source happens to define too (a
#: ``_route`` of the router, a ``_table`` of a moved table): each is reached on ``self``
#: only, in a class of the adapter that defines it.
OWN_NAMES = {"_coerce", "_open", "_options", "_route", "_table"}


def test_no_private_django_name_is_reached_outside_compat() -> None:
    """Every private Django name the adapter reads, writes or calls goes through
    ``compat.py``, but the documented underscore API (``_meta``, ``_state``, the
    default and base managers) and the hooks a subclass overrides."""
    allowed = set(compat.DOCUMENTED_UNDERSCORE_API)
    assert private_api.offenders("django", "django", allowed, OWN_NAMES) == []


def test_the_sql_query_api_is_reached_only_in_compat() -> None:
    """``sql.Query``'s attributes carry no underscore but are not public either
    (``query.low_mark``, ``query.order_by``): outside compat nothing reads them."""
    assert private_api.query_reaches("django", set(compat.PRIVATE_QUERY_API)) == []


def test_the_adapters_own_names_are_its_own() -> None:
    defined = private_api.names_defined(private_api.PACKAGE / "django")
    assert defined >= OWN_NAMES
    assert private_api.own_reaches_not_on_self("django", OWN_NAMES) == []
    assert not OWN_NAMES & set(compat.PRIVATE_API)


def test_every_overridden_hook_is_listed() -> None:
    assert private_api.overridden("django", "django", OWN_NAMES) <= set(
        compat.OVERRIDDEN_QUERYSET_HOOKS
    )


def test_every_private_name_compat_reaches_is_listed() -> None:
    """What compat reaches is on its lists, so the existence tests above check it."""
    private = private_api.framework_private_names("django")
    reached = {r.name for r in private_api.compat_reaches("django") if r.name in private}
    listed = set(compat.PRIVATE_API) | set(compat.DOCUMENTED_UNDERSCORE_API)
    assert reached - listed == set()


@pytest.mark.parametrize("name", compat.PRIVATE_MANAGER_API)
def test_each_private_manager_name_exists(name: str) -> None:
    assert hasattr(Ranked._default_manager, name), f"Manager.{name} is gone: update compat.py"


@pytest.mark.parametrize("name", compat.PRIVATE_OUTPUT_API)
def test_each_private_output_wrapper_name_exists(name: str) -> None:
    assert hasattr(OutputWrapper(io.StringIO()), name), f"OutputWrapper.{name} is gone"


@pytest.mark.parametrize("name", compat.PRIVATE_CONNECTIONS_API)
def test_each_private_connection_handler_name_exists(name: str) -> None:
    assert hasattr(connections, name), f"ConnectionHandler.{name} is gone: update compat.py"
