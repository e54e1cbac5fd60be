"""PostgreSQL makes the ids: installed by a migration per shard, returned, decoded."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from django.conf import settings
from django.db import connections

from .helpers import capture_all

pytestmark = [
    pytest.mark.versions,
    pytest.mark.skipif(
        not settings.DATABASE_IDS,
        reason="ids made by PostgreSQL need db_default (Django 5.0+) and PostgreSQL shards",
    ),
    pytest.mark.django_db(databases="__all__", transaction=True),
]


def _photo_model() -> type:
    from .pgapp.models import DbPhoto

    return DbPhoto


def test_create_gets_the_id_back_by_returning_and_routes_by_it() -> None:
    DbPhoto = _photo_model()
    with capture_all() as log:
        photo = DbPhoto.objects.create(owner_id=31341)
    alias = photo._state.db
    assert log.count() == 1 and log.count(alias, "INSERT") == 1
    assert "RETURNING" in log.sql(alias)[0]
    field = DbPhoto._meta.pk
    parts = photo.id_parts
    assert parts.shard == field.shard_map.ranges[alias][0]  # the shard's own first logical shard
    assert field.shard_map.database_for(photo.id) == alias
    assert DbPhoto.objects.get(pk=photo.id).owner_id == 31341


def test_bulk_create_fetches_ids_in_one_round_trip_per_shard() -> None:
    DbPhoto = _photo_model()
    photos = DbPhoto.objects.bulk_create([DbPhoto(owner_id=i) for i in range(200)])
    ids = [p.id for p in photos]
    assert len(set(ids)) == 200 and all(isinstance(i, int) for i in ids)
    assert DbPhoto.objects.on_all_shards().count() == 200


def test_migration_is_idempotent_and_never_resets_the_state() -> None:
    from uid_fields.django.operations import next_id_function

    connection = connections["shard_1"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT uid_next_id()")
        (before,) = cursor.fetchone()
        for statement in next_id_function(
            "photos", "main", "shard_1", "uid_next_id"
        ).create_statements():
            cursor.execute(statement)  # a re-run migration
        cursor.execute("SELECT uid_next_id()")
        (after,) = cursor.fetchone()
    assert after > before


def test_concurrent_connections_above_1024_per_ms_never_duplicate() -> None:
    dsn = connections["shard_2"].get_connection_params()
    conninfo = psycopg.conninfo.make_conninfo(
        dbname=dsn["dbname"], user=dsn.get("user"), host=dsn.get("host"), port=dsn.get("port")
    )

    def burst(_: int) -> list[int]:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            rows = conn.execute("SELECT uid_next_id() FROM generate_series(1, 5000)").fetchall()
        return [r[0] for r in rows]

    with ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(burst, range(8)))
    ids = [i for batch in batches for i in batch]
    assert len(ids) == 40_000 and len(set(ids)) == 40_000
    layout = _photo_model()._meta.pk.layout
    per_ms: dict[int, int] = {}
    for value in ids:
        ms = layout.decompose(value).timestamp_ms
        per_ms[ms] = per_ms.get(ms, 0) + 1
    assert max(per_ms.values()) <= 1024


def test_the_operation_reverses_and_reapplies() -> None:
    from uid_fields.django.operations import InstallNextId

    operation = InstallNextId(generator="photos", shards="main", function="uid_other_id")
    connection = connections["shard_3"]

    def installed() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regprocedure('uid_other_id()') IS NOT NULL")
            return bool(cursor.fetchone()[0])

    with connection.schema_editor() as editor:
        operation.database_forwards("pgapp", editor, None, None)
    assert installed()
    with connection.schema_editor() as editor:
        operation.database_backwards("pgapp", editor, None, None)
    assert not installed()
    assert operation.deconstruct() == (
        "uid_fields.django.operations.InstallNextId",
        [],
        {"generator": "photos", "shards": "main", "function": "uid_other_id"},
    )
    # A function still used by a column default is never dropped behind its back.
    with (
        pytest.raises(Exception, match="depends on function"),
        connection.schema_editor() as editor,
    ):
        InstallNextId(generator="photos", shards="main").database_backwards(
            "pgapp", editor, None, None
        )


def test_the_c_function_is_chosen_per_generator_and_checked_by_check_db() -> None:
    """``"next_id_language": "c"`` installs SQL functions calling the ``uid_fields``
    extension; on a server that does not preload its library (this one), ``check-db``
    says so with the fix, and ``--fix`` does not try to install (the C function's own
    tests run on a server that preloads it: tests/core/test_postgres_c_function.py and
    tests/core/test_pg_extension.py)."""
    import copy
    from io import StringIO

    from django.core.management import CommandError, call_command
    from django.test.utils import override_settings

    from uid_fields.django.operations import next_id_function

    changed = copy.deepcopy(settings.UID_FIELDS)
    changed["GENERATORS"]["photos"]["next_id_language"] = "c"
    with override_settings(UID_FIELDS=changed):
        function = next_id_function("photos", "main", "shard_1", "uid_next_id")
        assert function.language == "c"
        statements = function.create_statements()
        assert not any("LANGUAGE c" in statement for statement in statements)
        assert any("uid_fields.next_id(" in statement for statement in statements)
        for fix in ([], ["--fix"]):
            with pytest.raises(CommandError, match=r"shared_preload_libraries = 'uid_fields'"):
                call_command(
                    "uid_fields", "check-db", "--database", "shard_1", *fix, stdout=StringIO()
                )
    call_command("uid_fields", "check-db", "--database", "shard_1", stdout=StringIO())
