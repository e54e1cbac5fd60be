"""A fan-out's page builds model instances of the rows it returns only: the shards' rows
are merged on their raw ordering values first (the query compiled once for the shards'
backend), so ``[:5]`` over 4 shards builds 5 instances, not 20.

Instances built are counted with ``post_init``; the rows must still be those of the
whole merge (``test_fanout_merge`` holds that to one database's answer).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.db.backends.signals import connection_created
from django.db.models import F, Value
from django.db.models.signals import post_init

from tests.django.testapp.models import Ranked
from uid_fields.django import compat
from uid_fields.ops import parallel

#: Django 6.1's ModelIterable has fetch modes, which CompiledSelect does not repeat yet:
#: there a page is built by Django's iterable on each shard (docs/routing.md says so).
built_once = pytest.mark.skipif(
    not compat.PAGES_BUILT_ONCE, reason="Django 6.1: pages are built per shard by Django"
)

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


@pytest.fixture
def built() -> Iterator[list[Any]]:
    made: list[Any] = []

    def count(sender: Any, instance: Any, **kwargs: Any) -> None:
        made.append(instance)

    post_init.connect(count, sender=Ranked)
    yield made
    post_init.disconnect(count, sender=Ranked)


@pytest.fixture
def ranked() -> list[Ranked]:
    made = Ranked.objects.bulk_create(
        [Ranked(bucket=i % 11, rank=i % 5 or None, name=f"n{i % 7}") for i in range(80)]
    )
    assert len({r._state.db for r in made}) >= 3
    return made


@built_once
def test_a_page_builds_only_the_rows_it_returns(ranked: list[Ranked], built: list[Any]) -> None:
    page = list(Ranked.objects.on_all_shards().order_by("-pk")[2:7])
    assert [r.pk for r in page] == sorted((r.pk for r in ranked), reverse=True)[2:7]
    assert len(built) == 5
    assert {r._state.db for r in page} <= set(Ranked.objects.on_all_shards().shard_aliases)
    assert all(Ranked.objects.using(r._state.db).filter(pk=r.pk).exists() for r in page)


def test_annotations_nulls_and_deferred_fields_keep_their_values(ranked: list[Ranked]) -> None:
    by_pk = {r.pk: r for r in ranked}
    page = list(
        Ranked.objects.on_all_shards()
        .annotate(twice=F("rank") * 2, label=Value("x"))
        .order_by(F("rank").desc(nulls_last=True), "pk")[:12]
    )
    expected = sorted(ranked, key=lambda r: (-(r.rank or -1), r.pk))[:12]
    assert [r.pk for r in page] == [r.pk for r in expected]
    assert all(r.twice == (by_pk[r.pk].rank or 0) * 2 or r.rank is None for r in page)
    assert {r.label for r in page} == {"x"}
    deferred = list(Ranked.objects.on_all_shards().only("pk", "rank").order_by("rank", "pk")[:4])
    assert [r.name for r in deferred] == [by_pk[r.pk].name for r in deferred]  # loads on access
    unordered_field = list(Ranked.objects.on_all_shards().only("pk").order_by("rank", "pk")[:4])
    assert [r.pk for r in unordered_field] == [r.pk for r in deferred]


@built_once
@pytest.mark.django_db(databases="__all__", transaction=True)
def test_a_postgresql_page_reads_every_shard_from_one_thread(ranked: list[Ranked]) -> None:
    """The SQL goes to every shard before any answer is read (libpq, no thread per
    shard): the shards' connections open on one pool thread. A connection whose queries
    are observed (an execute wrapper) keeps the thread per shard, and sees them."""
    if connections["shard_0"].vendor != "postgresql":
        pytest.skip("sending to every shard at once is psycopg 3's")
    parallel.shutdown()
    opened: list[tuple[str, str]] = []

    def record(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append((connection.alias, threading.current_thread().name))

    connection_created.connect(record)
    try:
        page = list(Ranked.objects.on_all_shards().order_by("-pk")[:6])
        assert [r.pk for r in page] == sorted((r.pk for r in ranked), reverse=True)[:6]
        aliases = set(Ranked.objects.on_all_shards().shard_aliases)
        threads = {thread for alias, thread in opened if alias in aliases}
        assert len(threads) == 1 and threads.pop().startswith("uid_fields-fanout-all-shards")
        seen: list[str] = []

        def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            seen.append(context["connection"].alias)
            return execute(sql, params, many, context)

        parallel.shutdown()
        opened.clear()
        connection_created.disconnect(record)

        def observe(sender: Any, connection: Any, **kwargs: Any) -> None:
            connection.execute_wrappers.append(count)

        connection_created.connect(observe)
        try:
            again = list(Ranked.objects.on_all_shards().order_by("-pk")[:6])
        finally:
            connection_created.disconnect(observe)
        assert [r.pk for r in again] == [r.pk for r in page]
        assert set(seen) == aliases
    finally:
        connection_created.disconnect(record)
        parallel.shutdown()
