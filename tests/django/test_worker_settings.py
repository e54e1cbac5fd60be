"""Lease-based worker ids declared in settings, and a prefork server's workers using them."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
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


# A short ttl: the tests flush the lease table, so a claim waits out ttl + margin (the
# quarantine of a table whose marker row is gone).
DATABASE_WORKER = {"lease": "database", "database": "default", "name": "orders", "ttl": 3}


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


@pytest.mark.stress
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
        assert all("ok" in r for r in results), [r for r in results if "ok" not in r]
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

    from uid_fields.ids.leases.database import COLUMNS, TABLE, UNIQUE, ddl

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


# -- the system checks do no I/O -------------------------------------------------------------


def test_check_claims_no_redis_lease(prefix: str) -> None:
    from django.core.management import call_command

    with override_settings(UID_FIELDS=with_worker(redis_worker(prefix))):
        call_command("check", verbosity=0)  # check always runs the checks
    assert list(services.redis_client().scan_iter(match=f"{prefix}*")) == []


def test_field_checks_claim_no_lease(prefix: str) -> None:
    from django.db import models
    from django.test.utils import isolate_apps

    from uid_fields.django import ShardedBigIntField, SnowflakeField

    config = with_worker(redis_worker(prefix))
    config["GENERATORS"]["photos"]["fields"] = {"worker": redis_worker(prefix)}
    config["GENERATORS"]["photos"]["layout"] = {
        "fields": [["shard", 8], ["worker", 5]],
        "sequence_bits": 10,
    }
    with override_settings(UID_FIELDS=config), isolate_apps("tests.django.testapp"):

        class Leased(models.Model):
            id = SnowflakeField(primary_key=True, shards="main")

            class Meta:
                app_label = "testapp"

        class LeasedPhoto(models.Model):
            id = ShardedBigIntField(
                primary_key=True, generator="photos", shards="main", shard_key="owner"
            )
            owner = models.BigIntegerField()

            class Meta:
                app_label = "testapp"

        assert Leased._meta.pk.check() == []
        assert LeasedPhoto._meta.pk.check() == []
    assert list(services.redis_client().scan_iter(match=f"{prefix}*")) == []


MIGRATE_A_FRESH_DATABASE = """
import sqlite3, sys
import django
from django.conf import settings
from django.core.management import call_command

path = sys.argv[1]
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "uid_fields.django"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": path}},
    USE_TZ=True,
    UID_FIELDS={
        "GENERATORS": {
            "default": {
                "kind": "snowflake",
                "epoch": "2024-01-01T00:00:00Z",
                "fields": {
                    "datacenter": 0,
                    "worker": {"lease": "database", "database": "default", "name": "orders"},
                },
            }
        }
    },
)
django.setup()
call_command("migrate", verbosity=0, skip_checks=False)  # as manage.py migrate does
tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
print("uid_fields_worker_lease" in {name for (name,) in tables})
"""


def test_migrate_creates_the_lease_table_that_a_database_lease_needs(tmp_path: Path) -> None:
    """The checks that migrate runs first must not need the table migrate creates."""
    run = subprocess.run(
        [sys.executable, "-c", MIGRATE_A_FRESH_DATABASE, str(tmp_path / "fresh.sqlite3")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True"
