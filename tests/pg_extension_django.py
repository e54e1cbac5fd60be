"""Django in a process of its own, on two shard databases reached as an ordinary role.

Run by tests/core/test_pg_extension.py (``python -m tests.pg_extension_django URL URL``):
the test process has its own Django settings, and these two databases live on a
throwaway cluster that preloads the uid_fields extension's library. The migration of
``tests.django.pgapp`` installs ``next_id`` in C on each shard (``InstallNextId``) as the
role of the URLs, which is no superuser; then rows get their ids from each database.
Prints ``{alias: [id, ...]}`` (the ids stored there) as JSON.
"""

from __future__ import annotations

import json
import sys
from urllib.parse import urlsplit

import django
from django.apps import apps
from django.conf import settings
from django.core.management import call_command

SHARDS = ("shard_0", "shard_1")


def _database(url: str) -> dict[str, object]:
    parts = urlsplit(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username,
        "HOST": parts.hostname,
        "PORT": parts.port,
    }


def main(urls: list[str]) -> None:
    settings.configure(
        DATABASES={
            "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
            **{alias: _database(url) for alias, url in zip(SHARDS, urls, strict=True)},
        },
        INSTALLED_APPS=["django.contrib.contenttypes", "uid_fields.django", "tests.django.pgapp"],
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        UID_FIELDS={
            "GENERATORS": {
                "photos": {
                    "kind": "sharded",
                    "layout": "instagram",
                    "epoch": "2024-01-01T00:00:00Z",
                    "single_process": True,
                    "next_id_language": "c",
                }
            },
            "SHARDS": {"main": {"databases": list(SHARDS)}},
        },
    )
    django.setup()
    photo = apps.get_model("pgapp", "DbPhoto")
    made: dict[str, list[int]] = {}
    for alias in SHARDS:
        call_command("migrate", "pgapp", database=alias, verbosity=0)
        call_command("migrate", "pgapp", database=alias, verbosity=0)  # idempotent
    for owner in range(0, 8192, 64):  # routed by owner to the shard that owns it
        photo.objects.create(owner_id=owner)
    for alias in SHARDS:
        made[alias] = list(photo.objects.using(alias).values_list("id", flat=True))
    call_command("uid_fields", "check-db")
    print(json.dumps(made))


if __name__ == "__main__":
    main(sys.argv[1:])
