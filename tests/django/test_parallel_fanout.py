"""Fan-outs run on every shard at once when that is safe, one after another when not.

Which thread opened a connection tells the two apart: a parallel fan-out's queries run
on the core's pool threads (``uid_fields-fanout-*``), each with connections of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import transaction
from django.db.backends.signals import connection_created
from django.db.models import Count, Max

from tests.django.testapp.models import Order
from uid_fields.ops import parallel

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


@pytest.fixture
def opened() -> Iterator[list[tuple[str, str]]]:
    """(alias, thread name) of every connection opened during the test."""
    parallel.shutdown()  # no worker holds a connection yet
    seen: list[tuple[str, str]] = []

    def record(sender: Any, connection: Any, **kwargs: Any) -> None:
        seen.append((connection.alias, threading.current_thread().name))

    connection_created.connect(record)
    yield seen
    connection_created.disconnect(record)
    parallel.shutdown()


def workers(seen: list[tuple[str, str]]) -> set[str]:
    return {alias for alias, thread in seen if thread.startswith("uid_fields-fanout")}


def test_fan_outs_answer_the_same_in_parallel_and_in_sequence(
    opened: list[tuple[str, str]],
) -> None:
    orders = [Order.objects.create(note=f"n{i % 7}") for i in range(60)]
    everywhere = Order.objects.on_all_shards()
    in_parallel = (
        everywhere.count(),
        list(everywhere.order_by("-id").values_list("id", flat=True)[:10]),
        everywhere.aggregate(Max("id"), Count("id")),
        everywhere.filter(note="n3").exists(),
        sorted(o.pk for o in everywhere.filter(note="n1")),
    )
    with transaction.atomic(using="shard_0"), transaction.atomic(using="shard_1"):
        in_sequence = (
            everywhere.count(),
            list(everywhere.order_by("-id").values_list("id", flat=True)[:10]),
            everywhere.aggregate(Max("id"), Count("id")),
            everywhere.filter(note="n3").exists(),
            sorted(o.pk for o in everywhere.filter(note="n1")),
        )
    assert in_parallel == in_sequence
    assert in_parallel[0] == 60
    assert in_parallel[1] == sorted((o.pk for o in orders), reverse=True)[:10]
    shards = set(settings.SHARDS)
    if settings.BACKEND == "sqlite":
        assert workers(opened) == set()  # SQLite: always one after another
    else:
        assert workers(opened) == shards  # each shard's query ran on a pool thread


def test_inside_a_transaction_the_fan_out_stays_on_this_thread(
    opened: list[tuple[str, str]],
) -> None:
    Order.objects.create(note="x")
    with transaction.atomic(using="shard_2"):
        created = Order.objects.create(note="only in this transaction")
        if created._state.db == "shard_2":
            assert Order.objects.on_all_shards().filter(note=created.note).count() == 1
        Order.objects.on_all_shards().count()
    assert workers(opened) == set()


@pytest.mark.skipif(settings.BACKEND != "postgres", reason="terminates PostgreSQL sessions")
def test_a_pool_connection_the_server_closed_is_replaced(
    opened: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connections

    from uid_fields.django.query import fanout

    Order.objects.create(note="one")
    assert Order.objects.on_all_shards().count() == 1  # the pool threads connect
    for alias in settings.SHARDS:  # the server drops every other session (a restart)
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    monkeypatch.setattr(fanout, "_IDLE_CHECK_S", -1.0)  # as after a long idle time
    assert Order.objects.on_all_shards().count() == 1
