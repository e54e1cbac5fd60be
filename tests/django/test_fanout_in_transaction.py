"""Fan-outs inside ``atomic`` read every shard at once and still see the transaction.

A shard whose connection holds the transaction is read on that connection (from this
thread: the page's SQL sent to all of them before any answer is read), the others on the
pool at the same time. The barrier (``tests.pg_barrier``) proves the overlap without a
clock: each shard's query waits until every shard's is running, and shards read one
after another time out there and return no rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connections, transaction

from tests.django.testapp.models import Order
from tests.pg_barrier import BARRIER_FUNCTION, barrier_sql, new_marker
from uid_fields.django import sharded_atomic
from uid_fields.ops import parallel

pytestmark = [
    pytest.mark.django_db(databases="__all__", transaction=True),
    pytest.mark.skipif(settings.BACKEND != "postgres", reason="a PostgreSQL barrier"),
]


@pytest.fixture(autouse=True)
def barrier() -> Iterator[None]:
    parallel.shutdown()
    for alias in settings.SHARDS:
        with connections[alias].cursor() as cursor:
            cursor.execute(BARRIER_FUNCTION)
    yield
    parallel.shutdown()


def _one_per_shard(note: str) -> list[Order]:
    """Orders with ``note`` until every shard holds one, newest first."""
    made: list[Order] = []
    while len({order._state.db for order in made}) < len(settings.SHARDS):
        made.append(Order.objects.create(note=note))
    return sorted(made, key=lambda o: -o.pk)


def _at_the_barrier(note: str) -> object:
    marker = new_marker()
    return (
        Order.objects.on_all_shards()
        .filter(note=note)
        .extra(where=[barrier_sql(marker, len(settings.SHARDS))])
    )


def test_a_page_inside_sharded_atomic_reads_every_shard_at_once() -> None:
    with sharded_atomic():
        made = _one_per_shard("uncommitted")
        page = list(_at_the_barrier("uncommitted").order_by("-id")[:100])  # type: ignore[attr-defined]
        assert [o.pk for o in page] == [o.pk for o in made]  # its own writes, every shard
        transaction.set_rollback(True, using="default")


def test_a_page_inside_one_shards_atomic_reads_the_others_on_the_pool() -> None:
    committed = _one_per_shard("seen")
    with transaction.atomic(using="shard_0"):
        while True:  # one more on shard_0, uncommitted
            mine = Order.objects.create(note="seen")
            if mine._state.db == "shard_0":
                break
            mine.delete()
        page = list(_at_the_barrier("seen").order_by("-id")[:100])  # type: ignore[attr-defined]
        assert mine.pk in {o.pk for o in page}
        assert {o.pk for o in committed} <= {o.pk for o in page}


def test_a_count_inside_one_shards_atomic_reads_the_others_at_the_same_time() -> None:
    _one_per_shard("counted")
    with transaction.atomic(using="shard_1"):
        while Order.objects.create(note="counted")._state.db != "shard_1":
            pass
        shard_1 = Order.objects.using("shard_1").filter(note="counted").count()
        expected = shard_1 + sum(
            Order.objects.using(alias).filter(note="counted").count()
            for alias in settings.SHARDS
            if alias != "shard_1"
        )
        assert _at_the_barrier("counted").count() == expected  # type: ignore[attr-defined]


def test_a_count_and_values_inside_sharded_atomic_read_every_shard_at_once() -> None:
    with sharded_atomic():
        made = _one_per_shard("all held")
        assert _at_the_barrier("all held").count() == len(made)  # type: ignore[attr-defined]
        ids = _at_the_barrier("all held").order_by("-id").values_list("id", flat=True)  # type: ignore[attr-defined]
        assert list(ids) == [o.pk for o in made]
        transaction.set_rollback(True, using="default")
