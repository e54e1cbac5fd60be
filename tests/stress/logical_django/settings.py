"""A Django project of its own for the move by logical replication through
``manage.py uid_fields move-shards`` (tests/stress/test_logical_move_django.py).

Two PostgreSQL databases on throwaway clusters, their ports in the environment:
``src`` (``wal_level=logical``) owns every logical shard of the map ``pics``, until
``LOGICAL_MOVE_DEPLOYED=1`` stands for the new map, which gives 4096..8191 to ``dst``.
"""

from __future__ import annotations

import os

SECRET_KEY = "tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["uid_fields.django", "tests.stress.logical_django.pics"]


def _database(port_variable: str, name: str) -> dict[str, object]:
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": os.environ.get(port_variable, "5432"),
    }


DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
    "src": _database("LOGICAL_MOVE_SOURCE_PORT", "pics_src"),
    "dst": _database("LOGICAL_MOVE_TARGET_PORT", "pics_dst"),
}
DATABASE_ROUTERS = ["uid_fields.django.ShardRouter"]
DEPLOYED = os.environ.get("LOGICAL_MOVE_DEPLOYED") == "1"
UID_FIELDS = {
    "GENERATORS": {
        "default": {
            "kind": "snowflake",
            "layout": "twitter",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {"datacenter": 0, "worker": 1},
        },
        "pics": {
            "kind": "sharded",
            "layout": "instagram",
            "epoch": "2024-01-01T00:00:00Z",
            "single_process": True,
        },
    },
    "SHARDS": {
        "pics": (
            {"ranges": {"src": [0, 4096], "dst": [4096, 8192]}, "logical_shards": 8192}
            if DEPLOYED
            else {"ranges": {"src": [0, 8192]}, "logical_shards": 8192, "incoming": ["dst"]}
        )
    },
}
