"""Settings of the Django test project.

``UID_FIELDS_TEST_DB`` picks where the four shard databases live: ``sqlite`` (files,
the default), ``postgres`` or ``mysql`` (MariaDB); ``default`` stays SQLite.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import django

from tests.services import database_name

BACKEND = os.environ.get("UID_FIELDS_TEST_DB", "sqlite")
SHARDS = ["shard_0", "shard_1", "shard_2", "shard_3"]
DATA_DIR = Path(tempfile.gettempdir()) / f"uid_fields_tests_{os.getpid()}"
DATA_DIR.mkdir(exist_ok=True)

SECRET_KEY = "tests-only"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rest_framework",
    "django_filters",
    "uid_fields.django",
    "tests.django.testapp",
    "tests.django.opsapp",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "uid_fields.django.middleware.CanonicalPublicIdMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
ROOT_URLCONF = "tests.django.urls"
REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["uid_fields.django.rest.UidJSONRenderer"],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
}
DATABASE_ROUTERS = ["uid_fields.django.ShardRouter"]
# The admin tests log users in: PBKDF2's million iterations per hash are felt on a
# loaded machine, and test users need no strong hash.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _sqlite(name: str) -> dict[str, object]:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(DATA_DIR / f"{name}.sqlite3"),
        "TEST": {"NAME": str(DATA_DIR / f"test_{name}.sqlite3")},
    }


def _postgres(name: str) -> dict[str, object]:
    url = urlsplit(
        os.environ.get("UID_FIELDS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": url.username or "postgres",
        "PASSWORD": url.password or "",
        "HOST": url.hostname or "127.0.0.1",
        "PORT": url.port or 5432,
    }


def _mysql(name: str) -> dict[str, object]:
    import pymysql

    pymysql.install_as_MySQLdb()
    url = urlsplit(os.environ.get("UID_FIELDS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"))
    return {
        "ENGINE": "django.db.backends.mysql",
        "NAME": name,
        "USER": url.username or "root",
        "PASSWORD": url.password or "",
        "HOST": url.hostname or "127.0.0.1",
        "PORT": url.port or 3306,
        "OPTIONS": {"charset": "utf8mb4"},
    }


_shard = {"sqlite": _sqlite, "postgres": _postgres, "mysql": _mysql}[BACKEND]
DATABASES = {"default": _sqlite("default")}
for index, alias in enumerate(SHARDS):
    DATABASES[alias] = _shard(database_name("uidf_dj", index))
# A spare server that owns no logical shard ("incoming" in the map): migrated like the
# shards, tests/django/test_move_shards.py moves shards onto it.
SPARE = "shard_4"
DATABASES[SPARE] = _shard(database_name("uidf_dj", len(SHARDS)))
# A read replica of shard_1 (in no map here: tests/django/test_replicas.py adds it). In
# tests Django points it at shard_1's database (a replica without lag);
# test_replicas.py also runs against a real streaming replica.
REPLICA = "shard_1_r1"
DATABASES[REPLICA] = {**DATABASES["shard_1"], "TEST": {"MIRROR": "shard_1"}}

# Ids made by PostgreSQL need db_default (Django 5.0+); check E009 explains it on 4.2.
DATABASE_IDS = BACKEND == "postgres" and django.VERSION >= (5, 0)
if DATABASE_IDS:
    INSTALLED_APPS.append("tests.django.pgapp")

UID_FIELDS = {
    "GENERATORS": {
        "default": {
            "kind": "snowflake",
            "layout": "twitter",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {"datacenter": 0, "worker": 1},
        },
        # One test process writes: no shared sequence needed (E016 otherwise).
        "photos": {
            "kind": "sharded",
            "layout": "instagram",
            "epoch": "2024-01-01T00:00:00Z",
            "single_process": True,
        },
        "events": {"kind": "locality", "sequential": False},
        "legacy": {
            "kind": "decimal",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {"server": 3},
            "unsigned": BACKEND == "mysql",
        },
        "php": {"kind": "uniqid", "total_shards": 4},
    },
    "SHARDS": {"main": {"databases": SHARDS, "incoming": [SPARE]}},
    # Public ids (public_prefix= on Order, Customer, Purchase, PageView): tests only.
    "PUBLIC_IDS": {"KEYS": {1: "tests-only public id key, version 1"}},
}
