"""Read replicas per shard in Django: ``"replicas"`` in a shard map.

``shard_1_r1`` mirrors ``shard_1`` (Django's test MIRROR: the same database through
another connection), so what is checked is where each query goes; the SQLAlchemy tests
also run against a real PostgreSQL streaming replica.
"""

from __future__ import annotations

import copy
import io
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.signals import request_started
from django.db import connections, router, transaction
from django.test.utils import CaptureQueriesContext, override_settings

from tests.django.testapp.models import Customer, Order, Purchase
from tests.postgres_servers import postgres_cluster, streaming_replica, wait_for_replay
from uid_fields.django.connections.replicas import read_from_primary
from uid_fields.ops import parallel

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

PRIMARY, REPLICA = "shard_1", settings.REPLICA


def with_replicas(
    seconds: float = 5, replicas: object = None, *, described: bool = False
) -> override_settings:
    """``replicas`` in the map, or (``described``) each database of the map described
    as ``{"primary": ..., "replicas": [...]}`` in a ``databases`` dict."""
    config = copy.deepcopy(settings.UID_FIELDS)
    if described:
        config["SHARDS"]["main"]["databases"] = {
            alias: {"primary": alias, "replicas": [REPLICA] if alias == PRIMARY else []}
            for alias in settings.SHARDS
        }
    else:
        config["SHARDS"]["main"]["replicas"] = replicas or {PRIMARY: [REPLICA]}
    config["READ_YOUR_WRITES_SECONDS"] = seconds
    return override_settings(UID_FIELDS=config)


def new_request() -> None:
    request_started.send(sender=None)


@contextmanager
def queries() -> Iterator[dict[str, CaptureQueriesContext]]:
    captured = {a: CaptureQueriesContext(connections[a]) for a in (PRIMARY, REPLICA)}
    for context in captured.values():
        context.__enter__()
    try:
        yield captured
    finally:
        for context in captured.values():
            context.__exit__(None, None, None)


def on_primary() -> Order:
    while True:
        order = Order.objects.create(note="n")
        if order._state.db == PRIMARY:
            return order


@pytest.mark.parametrize("described", [False, True], ids=["replicas", "databases"])
def test_reads_go_to_the_replica_and_rows_still_write_to_their_primary(described: bool) -> None:
    with with_replicas(described=described):
        order = on_primary()
        new_request()
        with queries() as log:
            found = Order.objects.get(pk=order.pk)
        assert len(log[REPLICA]) == 1 and len(log[PRIMARY]) == 0
        assert found._state.db == PRIMARY  # saves and related managers use the primary
        found.note = "edited"
        with queries() as log:
            found.save()
            again = Order.objects.get(pk=order.pk)  # read your writes: the primary
        assert [q["sql"].split()[0] for q in log[PRIMARY]] == ["UPDATE", "SELECT"]
        assert len(log[REPLICA]) == 0 and again.note == "edited"


def test_the_pin_lasts_for_the_request_and_its_seconds() -> None:
    with with_replicas(seconds=0):  # no pin: a replica with lag would be read at once
        order = on_primary()
        with queries() as log:
            Order.objects.get(pk=order.pk)
        assert len(log[REPLICA]) == 1
    with with_replicas(seconds=30):
        order = on_primary()
        with queries() as log:
            Order.objects.get(pk=order.pk)
        assert len(log[PRIMARY]) == 1 and len(log[REPLICA]) == 0
        new_request()  # the next request is not pinned by this one's writes
        with queries() as log:
            Order.objects.get(pk=order.pk)
        assert len(log[REPLICA]) == 1


def test_transactions_locks_and_explicit_checks_read_the_primary() -> None:
    with with_replicas():
        order = on_primary()
        new_request()
        with queries() as log, transaction.atomic(using=PRIMARY):
            Order.objects.get(pk=order.pk)
            Order.objects.select_for_update().get(pk=order.pk)
        assert len(log[REPLICA]) == 0
        with queries() as log, read_from_primary():
            Order.objects.get(pk=order.pk)
        assert len(log[REPLICA]) == 0 and len(log[PRIMARY]) == 1
        with queries() as log:
            Order.objects.get_or_create(pk=order.pk)  # about to write: the primary
        assert len(log[REPLICA]) == 0


@pytest.fixture
def sequential_fan_outs() -> Iterator[None]:
    """Fan-outs on this thread's connections, where the test can see their queries."""
    before = parallel.workers()
    parallel.set_workers(0)
    yield
    parallel.set_workers(before)


@pytest.mark.usefixtures("sequential_fan_outs")
def test_fan_outs_related_rows_and_counts_read_the_replica() -> None:
    with with_replicas():
        on_primary()
        customer = Customer.objects.create(name="c")
        while customer._state.db != PRIMARY:
            customer = Customer.objects.create(name="c")
        Purchase.objects.create(customer=customer, total=3)
        new_request()
        with queries() as log:
            total = Order.objects.on_all_shards().count()
            rows = list(Order.objects.on_all_shards())
            again = Customer.objects.get(pk=customer.pk)
            purchases = list(again.purchases.all())
        assert total == len(rows) >= 1
        assert len(log[PRIMARY]) == 0 and len(log[REPLICA]) == 4
        assert [p.total for p in purchases] == [3] and purchases[0]._state.db == PRIMARY
        purchases[0].total = 4
        purchases[0].save()
        assert Purchase.objects.get(pk=purchases[0].pk).total == 4


def test_replicas_are_checked_and_never_migrated() -> None:
    assert router.allow_migrate(PRIMARY, "testapp", model_name="order")
    with with_replicas():
        assert not router.allow_migrate(REPLICA, "testapp", model_name="order")
    with with_replicas(replicas={PRIMARY: ["nowhere"]}):
        assert "uid_fields.E003" in {m.id for m in run_checks()}
    with with_replicas(replicas={PRIMARY: "shard_1_r1"}):
        assert "uid_fields.E014" in {m.id for m in run_checks()}
    with with_replicas(replicas={PRIMARY: {"primary": "shard_2", "replicas": [REPLICA]}}):
        assert "uid_fields.E014" in {m.id for m in run_checks()}


@pytest.fixture
def streaming(django_db_blocker: object) -> Iterator[tuple[str, str]]:
    """``rp`` on a throwaway PostgreSQL cluster and ``rp_r1``, a hot standby of it, in
    ``DATABASES``; the map ``main`` places every row on ``rp``."""
    with postgres_cluster() as primary:
        primary.create_database("rp")
        with streaming_replica(primary) as standby:
            base = {"ENGINE": "django.db.backends.postgresql", "HOST": "127.0.0.1"}
            extra = {
                "rp": {**base, "NAME": "rp", "USER": "postgres", "PORT": primary.port},
                "rp_r1": {**base, "NAME": "rp", "USER": "postgres", "PORT": standby.port},
            }
            configured = connections.configure_settings({"default": {**base, "NAME": "x"}, **extra})
            for alias in extra:
                connections.settings[alias] = configured[alias]
            config = copy.deepcopy(settings.UID_FIELDS)
            config["SHARDS"]["main"] = {"databases": ["rp"], "replicas": {"rp": ["rp_r1"]}}
            try:
                with override_settings(UID_FIELDS=config), django_db_blocker.unblock():  # type: ignore[attr-defined]
                    call_command("migrate", database="rp", verbosity=0)
                    wait_for_replay(primary.database_url("rp"), standby.database_url("rp"))
                    yield primary.database_url("rp"), standby.database_url("rp")
            finally:
                for alias in extra:
                    connections[alias].close()
                    del connections[alias]
                    del connections.settings[alias]


@pytest.mark.skipif(settings.BACKEND != "sqlite", reason="runs once, on a cluster of its own")
def test_a_real_streaming_replica_answers_reads_and_never_writes(
    streaming: tuple[str, str],
) -> None:
    order = Order.objects.create(note="on the primary")
    assert order._state.db == "rp"
    wait_for_replay(*streaming)
    new_request()
    with CaptureQueriesContext(connections["rp_r1"]) as replica:
        found = Order.objects.get(pk=order.pk)
    assert len(replica) == 1 and found._state.db == "rp"
    found.note = "edited"
    found.save()  # the standby is read-only: this only works on the primary
    assert Order.objects.get(pk=order.pk).note == "edited"  # pinned: read from the primary
    with connections["rp_r1"].cursor() as cursor, pytest.raises(Exception, match="read-only"):
        cursor.execute("DELETE FROM testapp_order")


def test_the_shards_command_shows_replicas_and_incoming_databases() -> None:
    out = io.StringIO()
    with with_replicas():
        call_command("uid_fields", "shards", stdout=out)
    lines = [line.split() for line in out.getvalue().splitlines() if line.startswith("  ")]
    assert next(w for w in lines if w[0] == PRIMARY)[-2:] == ["replicas", REPLICA]
    assert all("replicas" not in w for w in lines if w[0] != PRIMARY)
    assert any(w[:2] == [settings.SPARE, "incoming"] for w in lines)
