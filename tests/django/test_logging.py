"""What the Django adapter's fan-outs and next_id installs log (docs/logging.md).

The core decides the lines; these tests check that Django hands it the names an
operator knows (the database aliases).
"""

from __future__ import annotations

import logging
import re

import pytest
from django.conf import settings
from django.db import DatabaseError, connections

from tests.django.testapp.models import Order
from uid_fields.django.operations import InstallNextId

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def levels(caplog: pytest.LogCaptureFixture, logger: str, pattern: str) -> list[str]:
    return [
        r.levelname for r in caplog.records if r.name == logger and re.search(pattern, r.message)
    ]


def rename(alias: str, old: str, new: str) -> None:
    with connections[alias].cursor() as cursor:
        cursor.execute(f"ALTER TABLE {old} RENAME TO {new}")


def test_a_shard_that_fails_in_a_fan_out_is_a_warning_naming_its_alias(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="uid_fields")
    table = Order._meta.db_table
    rename("shard_2", table, f"{table}_away")  # the query fails on shard_2 only
    try:
        with pytest.raises(DatabaseError):
            Order.objects.on_all_shards().count()
    finally:
        rename("shard_2", f"{table}_away", table)
    assert levels(caplog, "uid_fields.fanout", r"query on shard_2 failed") == ["WARNING"]
    assert not levels(caplog, "uid_fields.fanout", r"shard_[013] failed")


@pytest.mark.skipif(
    not settings.DATABASE_IDS, reason="the functions live on PostgreSQL shards (Django 5.0+)"
)
def test_a_migration_that_installs_next_id_is_info_per_database(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="uid_fields")
    operation = InstallNextId(generator="photos", shards="main", function="uid_logged_id")
    connection = connections["shard_3"]
    for _ in range(2):
        with connection.schema_editor() as editor:
            operation.database_forwards("pgapp", editor, None, None)
    with connection.schema_editor() as editor:
        operation.database_backwards("pgapp", editor, None, None)
    with connection.schema_editor(collect_sql=True) as editor:  # sqlmigrate: nothing done
        operation.database_forwards("pgapp", editor, None, None)
    found = [r for r in caplog.records if r.name == "uid_fields.next_id"]
    assert [r.levelname for r in found] == ["INFO"] * 3
    assert re.match(
        r"installed uid_logged_id\(\) on database 'shard_3': logical shard", found[0].message
    )
    assert found[1].message.startswith("replaced uid_logged_id() on database 'shard_3'")
    assert found[2].message == "dropped uid_logged_id() on database 'shard_3'"
