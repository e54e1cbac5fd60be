"""Lease-based worker ids declared in settings, and a prefork server's workers using them."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test.utils import override_settings

from tests import services
from tests.core.test_fork import run_in_children
from tests.django.testapp.models import Order
from tests.redis_servers import key_prefix
from uid_fields import TWITTER, ConfigurationError, DatabaseLease, RedisLease
from uid_fields.django.conf import build_generator, get_generator
from uid_fields.django.models import WorkerLease


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def redis_worker(prefix: str) -> dict[str, Any]:
    return {
        "lease": "redis",
        "url": services.REDIS_URL,
        "name": "orders",
        "ttl": 10,
        "prefix": prefix,
    }


DATABASE_WORKER = {"lease": "database", "database": "default", "name": "orders", "ttl": 10}


def with_worker(worker: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(settings.UID_FIELDS)
    config["GENERATORS"]["default"]["fields"] = {"datacenter": 0, "worker": worker}
    return config


def test_a_redis_lease_from_settings(prefix: str) -> None:
    with override_settings(UID_FIELDS=with_worker(redis_worker(prefix))):
        gen = get_generator("default")
        assert gen.node == {"datacenter": 0, "worker": 0}
        lease = gen._sources["worker"]  # type: ignore[union-attr]
        assert isinstance(lease, RedisLease)
        assert services.redis_client().get(lease.key(0)) is not None
        order = Order()
        assert TWITTER.replace(epoch_ms=gen.layout.epoch_ms).decompose(order.pk).worker == 0
        lease.release()


@pytest.mark.django_db(transaction=True)
def test_a_database_lease_from_settings() -> None:
    with override_settings(UID_FIELDS=with_worker(DATABASE_WORKER)):
        gen = get_generator("default")
        assert gen.node == {"datacenter": 0, "worker": 0}
        row = WorkerLease.objects.get(name="orders", node=0)
        assert row.token is not None and row.expires_ms > 0
        assert WorkerLease.objects.filter(name="orders").count() == 32
        lease = gen._sources["worker"]  # type: ignore[union-attr]
        assert isinstance(lease, DatabaseLease)
        lease.release()
        assert WorkerLease.objects.get(name="orders", node=0).token is None


@pytest.mark.parametrize(
    ("worker", "key", "message"),
    [
        ({"lease": "zookeeper", "name": "x"}, "lease", "must be 'redis' or 'database'"),
        ({"lease": "redis", "name": "x"}, "url", "needs a 'url'"),
        ({"lease": "redis", "url": "redis://127.0.0.1:6379/0"}, "name", "needs a 'name'"),
        ({"lease": "database", "name": "x", "url": "redis://"}, "url", "unknown key 'url'"),
        ({"leese": "redis"}, "", "unknown source for field 'worker'"),
    ],
)
def test_bad_lease_settings_say_what_is_wrong(
    worker: dict[str, Any], key: str, message: str
) -> None:
    config = with_worker(worker)["GENERATORS"]["default"]
    path = "GENERATORS.default.fields.worker" + (f".{key}" if key else "")
    with pytest.raises(ConfigurationError, match=f"^{re.escape(path)}: .*{message}"):
        build_generator("default", config)


@pytest.mark.django_db(databases="__all__", transaction=True)
@pytest.mark.parametrize("kind", ["redis", "database"])
def test_four_prefork_workers_lease_their_own_ids(kind: str, prefix: str) -> None:
    """What gunicorn --preload with 4 workers does: build in the master, then fork."""
    worker = redis_worker(prefix) if kind == "redis" else DATABASE_WORKER
    with override_settings(UID_FIELDS=with_worker(worker)):
        master = Order(note="master")  # the generator is built (and leases) before forking
        layout = get_generator("default").layout

        def serve_requests() -> list[int]:
            return [Order(note="request").pk for _ in range(2000)]

        results = run_in_children(4, serve_requests)
        child_ids = [pk for r in results for pk in r["ok"]]  # type: ignore[union-attr]
        assert len(child_ids) == 8000, results
        workers = {layout.decompose(pk).worker for pk in child_ids}
        assert workers == {1, 2, 3, 4}  # the master keeps 0
        assert layout.decompose(master.pk).worker == 0
        everything = [master.pk, *child_ids, *(Order().pk for _ in range(100))]
        assert len(set(everything)) == len(everything)
        # The ids go in as primary keys, each on the shard it names.
        Order.objects.bulk_create([Order(pk=pk, note="x") for pk in child_ids[::40]])
        assert Order.objects.on_all_shards().count() == 200
        get_generator("default")._sources["worker"].release()  # type: ignore[union-attr]


@pytest.mark.django_db(databases="__all__")
def test_the_lease_table_lives_on_default_only() -> None:
    from django.db import connections

    assert "uid_fields_worker_lease" in connections["default"].introspection.table_names()
    for alias in settings.SHARDS:
        assert "uid_fields_worker_lease" not in connections[alias].introspection.table_names()


@pytest.mark.django_db
def test_the_migrated_lease_table_is_the_one_the_core_describes() -> None:
    import sqlite3

    from django.db import connections

    from uid_fields.leases.database import COLUMNS, TABLE, UNIQUE, ddl

    assert WorkerLease._meta.db_table == TABLE
    fields = [f for f in WorkerLease._meta.concrete_fields]
    assert [(f.column, f.null) for f in fields] == [(c.name, c.nullable) for c in COLUMNS]
    assert [getattr(f, "max_length", None) for f in fields] == [c.length for c in COLUMNS]
    [unique] = WorkerLease._meta.constraints
    assert tuple(unique.fields) == UNIQUE  # type: ignore[attr-defined]

    def columns(rows: list[tuple[Any, ...]]) -> list[tuple[str, str, bool]]:
        # (name, type, nullable) of every column but the primary key (spelt apart)
        return [(row[1], row[2].lower(), not row[3]) for row in rows if not row[5]]

    with connections["default"].cursor() as cursor:
        cursor.execute(f"PRAGMA table_info({TABLE})")
        migrated = columns(cursor.fetchall())
    made = sqlite3.connect(":memory:")
    made.execute(ddl("sqlite"))
    assert migrated == columns(made.execute(f"PRAGMA table_info({TABLE})").fetchall())
