"""Fan-outs under faults, on PostgreSQL shards: a frozen shard (a TCP proxy that stops
forwarding, as a SIGSTOPped server) is a deadline error naming it, not a hang; fan-outs
to the other shards go on; after it thaws, fan-outs work again. A pooled connection the
server dropped while idle is replaced once, for reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connections
from django.test.utils import override_settings

from tests.django.testapp.models import Order
from tests.tcp_proxy import FreezableProxy, freezable_proxy
from uid_fields.errors import FanOutTimeoutError
from uid_fields.ops import parallel

pytestmark = [
    pytest.mark.stress,
    pytest.mark.django_db(databases="__all__", transaction=True),
    pytest.mark.skipif(settings.BACKEND != "postgres", reason="runs in the PostgreSQL pass"),
]

FROZEN = "shard_3"


def _with_timeout(seconds: float) -> override_settings:
    return override_settings(UID_FIELDS={**settings.UID_FIELDS, "FAN_OUT_TIMEOUT": seconds})


@pytest.fixture
def proxied() -> Iterator[FreezableProxy]:
    """shard_3 reached through a proxy that can freeze (every new connection to it)."""
    parallel.shutdown()
    connections[FROZEN].close()
    entry = connections.settings[FROZEN]
    port = entry["PORT"]
    with freezable_proxy(int(port or 5432)) as proxy:
        entry["PORT"] = proxy.port
        try:
            yield proxy
        finally:
            proxy.thaw()
            parallel.shutdown()
            connections[FROZEN].close()
            entry["PORT"] = port


def test_a_frozen_shard_is_named_and_starves_nothing(proxied: FreezableProxy) -> None:
    orders = [Order.objects.create(note="x") for _ in range(24)]
    others = [o.pk for o in orders if o._state.db != FROZEN]
    assert len(others) < 24
    with _with_timeout(1.5):
        assert Order.objects.on_all_shards().count() == 24  # the pool connects, via the proxy
        proxied.freeze()
        with pytest.raises(FanOutTimeoutError, match=FROZEN) as raised:
            Order.objects.on_all_shards().count()
        assert raised.value.shards == [FROZEN]  # the deadline's error: only it names a shard
        assert Order.objects.filter(pk__in=others).count() == len(others)  # other shards
        proxied.thaw()
        assert Order.objects.on_all_shards().count() == 24  # works again, no restart


def test_a_connection_the_server_dropped_is_replaced_once_for_a_read() -> None:
    parallel.shutdown()
    for _ in range(12):
        Order.objects.create(note="x")
    assert Order.objects.on_all_shards().count() == 12  # pool threads hold connections
    with connections["default"].cursor():
        pass
    for alias in settings.SHARDS:  # a restart, as the idle pool sees it
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    try:
        for _ in range(6):
            assert Order.objects.on_all_shards().count() == 12
    finally:
        parallel.shutdown()


def test_a_frozen_shard_fails_a_page_read_from_one_thread_by_name(
    proxied: FreezableProxy,
) -> None:
    """A page of models sends to every shard from one thread: the deadline still names
    the frozen shard, its connection is discarded, and the next page works."""
    orders = [Order.objects.create(note="x") for _ in range(24)]
    newest = sorted((o.pk for o in orders), reverse=True)[:5]
    with _with_timeout(1.5):
        assert [o.pk for o in Order.objects.on_all_shards().order_by("-id")[:5]] == newest
        proxied.freeze()
        with pytest.raises(FanOutTimeoutError, match=FROZEN) as raised:
            list(Order.objects.on_all_shards().order_by("-id")[:5])
        assert raised.value.shards == [FROZEN]
        proxied.thaw()
        assert [o.pk for o in Order.objects.on_all_shards().order_by("-id")[:5]] == newest


def test_a_page_read_from_one_thread_replaces_dropped_connections() -> None:
    parallel.shutdown()
    orders = [Order.objects.create(note="x") for _ in range(12)]
    newest = sorted((o.pk for o in orders), reverse=True)[:5]
    assert [o.pk for o in Order.objects.on_all_shards().order_by("-id")[:5]] == newest
    for alias in settings.SHARDS:  # a restart, as the idle pool sees it
        with connections[alias].cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    try:
        for _ in range(3):
            assert [o.pk for o in Order.objects.on_all_shards().order_by("-id")[:5]] == newest
    finally:
        parallel.shutdown()


def test_connecting_to_a_frozen_shard_counts_inside_the_deadline_and_names_it(
    proxied: FreezableProxy,
) -> None:
    """As with ``CONN_MAX_AGE = 0``, where every fan-out connects: a shard that accepts
    and never answers is named by the deadline (or by the driver's connect timeout),
    for a page and for a count, never a bare error of no shard."""
    from django.db import DatabaseError

    for _ in range(12):
        Order.objects.create(note="x")
    entry = connections.settings[FROZEN]
    proxied.freeze()
    with _with_timeout(1.5):
        for read in ("page", "count"):
            parallel.shutdown()  # the pool's connections closed: each fan-out connects
            with pytest.raises(FanOutTimeoutError, match=FROZEN) as raised:
                if read == "page":
                    list(Order.objects.on_all_shards().order_by("-id")[:5])
                else:
                    Order.objects.on_all_shards().count()
            assert raised.value.shards == [FROZEN]
    options = entry.setdefault("OPTIONS", {})
    options["connect_timeout"] = 1  # the driver gives up first: its error names the shard
    try:
        with _with_timeout(3):
            for read in ("page", "count"):
                parallel.shutdown()
                with pytest.raises((FanOutTimeoutError, DatabaseError), match=FROZEN):
                    if read == "page":
                        list(Order.objects.on_all_shards().order_by("-id")[:5])
                    else:
                        Order.objects.on_all_shards().count()
    finally:
        del options["connect_timeout"]
