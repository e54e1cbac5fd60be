"""A ``bulk_create`` over several shards runs its per-shard INSERTs at the same time.

The transactions stay the caller's: each shard's INSERT runs on a pool thread that
borrows the calling thread's connection (and its open transaction) for the statement,
and the commits, or the rollback of every shard when one failed, run on the calling
thread. Inside ``atomic()`` (and on SQLite) the INSERTs run one after another on the
calling thread. Which thread ran each INSERT is recorded by an execute wrapper on the
calling thread's connections.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from django.conf import settings
from django.db import IntegrityError, connections, transaction

from tests.django.testapp.models import Order
from uid_fields.ops import parallel

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


@pytest.fixture
def inserts() -> Iterator[list[tuple[str, str]]]:
    """(alias, thread name) of every INSERT run on the shards' connections."""
    parallel.shutdown()
    seen: list[tuple[str, str]] = []

    def wrapper(alias: str) -> Callable[..., Any]:
        def record(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
            if sql.lstrip().upper().startswith("INSERT"):
                seen.append((alias, threading.current_thread().name))
            return execute(sql, *args)

        return record

    with ExitStack() as stack:
        for alias in settings.SHARDS:
            stack.enter_context(connections[alias].execute_wrapper(wrapper(alias)))
        yield seen
    parallel.shutdown()


def _on_pool_threads(seen: list[tuple[str, str]]) -> set[str]:
    return {alias for alias, thread in seen if thread.startswith("uid_fields-fanout")}


def test_each_shards_insert_runs_at_once_and_every_object_gets_its_id(
    inserts: list[tuple[str, str]],
) -> None:
    orders = Order.objects.bulk_create([Order(note=f"n{i}") for i in range(400)])
    placement = Order._meta.pk.placement  # type: ignore[union-attr]
    assert all(o.pk is not None for o in orders)
    assert len({o.pk for o in orders}) == 400
    for order in orders:  # on the database its id names, and found there by its id
        assert order._state.db == placement.database_of(order.pk)
    per_shard = Counter(o._state.db for o in orders)
    assert set(per_shard) == set(settings.SHARDS)
    for alias, count in per_shard.items():
        assert Order.objects.using(alias).count() == count
    assert Counter(alias for alias, _ in inserts) == Counter({a: 1 for a in settings.SHARDS})
    if settings.BACKEND == "sqlite":
        assert _on_pool_threads(inserts) == set()  # one file: one after another
    else:
        assert _on_pool_threads(inserts) == set(settings.SHARDS)


def test_an_error_on_one_shard_rolls_back_every_shard(
    inserts: list[tuple[str, str]],
) -> None:
    """A duplicate id on one shard: the error goes up, and no shard keeps a row of the
    batch (docs/transactions.md: every shard's transaction stays open until all
    succeeded), whether the INSERTs ran at once or in turn."""
    taken = Order.objects.create(note="already there")
    batch = [Order(note=f"n{i}") for i in range(200)] + [Order(pk=taken.pk, note="dup")]
    with pytest.raises(IntegrityError):
        Order.objects.bulk_create(batch)
    assert Order.objects.on_all_shards().count() == 1
    assert Order.objects.on_all_shards().get().note == "already there"
    if settings.BACKEND != "sqlite":  # the failure came from a pool thread
        assert taken._state.db in _on_pool_threads(inserts)
    # The shards' connections are usable again, on this thread and on the pool's.
    again = Order.objects.bulk_create([Order(note=f"m{i}") for i in range(40)])
    assert Order.objects.on_all_shards().count() == 41
    assert all(Order.objects.using(o._state.db).filter(pk=o.pk).exists() for o in again)


def test_inside_atomic_the_inserts_stay_on_this_thread(
    inserts: list[tuple[str, str]],
) -> None:
    with transaction.atomic(using="shard_1"):
        orders = Order.objects.bulk_create([Order(note=f"n{i}") for i in range(100)])
    assert _on_pool_threads(inserts) == set()
    assert {thread for _, thread in inserts} == {threading.current_thread().name}
    assert Order.objects.on_all_shards().count() == len(orders) == 100


def test_the_pool_threads_keep_their_own_connections(
    inserts: list[tuple[str, str]],
) -> None:
    """A pool thread that borrowed a shard's connection for an INSERT gives it back: a
    fan-out read afterwards runs on connections of its own, and closing them (the
    thread's idle exit) leaves this thread's connections open."""
    Order.objects.bulk_create([Order(note=f"n{i}") for i in range(100)])
    assert Order.objects.on_all_shards().count() == 100
    parallel.shutdown()  # the workers exit and close their connections
    mine = [connections[alias] for alias in settings.SHARDS]
    assert all(w.connection is not None and w.is_usable() for w in mine)
    assert sum(Order.objects.using(alias).count() for alias in settings.SHARDS) == 100
