"""manage.py uid_fields: decode, generate, shards, check-db, migrate-all."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from .testapp.models import Order, Photo

pytestmark = pytest.mark.django_db(databases="__all__")


def run(*args: str) -> str:
    out = StringIO()
    call_command("uid_fields", *args, stdout=out)
    return out.getvalue()


def test_decode_and_generate() -> None:
    order = Order()
    data = json.loads(run("decode", str(order.pk), "--json", "--generator", "default"))
    assert data["worker"] == 1 and data["id"] == order.pk
    assert "datetime" in run("decode", str(order.pk), "--generator", "default")
    ids = [int(x) for x in run("generate", "-n", "3").split()]
    assert len(ids) == 3 and ids == sorted(ids)
    photo_ids = [
        int(x) for x in run("generate", "-n", "2", "--generator", "photos", "--shard", "9").split()
    ]
    layout = Photo._meta.pk.layout
    assert {layout.field_of(i, "shard") for i in photo_ids} == {9}


def test_decode_without_a_generator_prints_every_reading() -> None:
    photo = Photo(owner_id=5)
    text = run("decode", str(photo.pk))
    assert "generator 'photos':" in text and "generator 'default':" in text
    readings = json.loads(run("decode", str(photo.pk), "--json"))
    assert readings["photos"]["shard"] == photo.id_parts.shard  # type: ignore[attr-defined]
    assert readings["photos"]["datetime"] != readings["default"]["datetime"]
    assert "events" not in readings  # a locality generator cannot read an integer


def test_decode_errors_are_command_errors() -> None:
    with pytest.raises(CommandError, match="cannot decode"):
        run("decode", "abc")
    with pytest.raises(CommandError, match="no generator"):
        run("decode", "1", "--generator", "nope")


def test_shards_lists_ranges_and_rows() -> None:
    Order.objects.bulk_create([Order() for _ in range(40)])
    lines = run("shards").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("testapp.Order "))
    block = lines[start + 1 : start + 1 + len(settings.SHARDS)]
    assert [line.split()[0] for line in block] == settings.SHARDS
    assert block[0].split()[2] == "0..255"  # 1024 logical shards, 256 per database
    assert sum(int(line.split()[-1]) for line in block) == 40


@pytest.mark.skipif(
    not settings.DATABASE_IDS, reason="the functions live on PostgreSQL shards (Django 5.0+)"
)
def test_check_db_verifies_every_shard() -> None:
    out = run("check-db")
    assert out.count(" ok") == len(settings.SHARDS)
    from django.db import connections

    with connections["shard_2"].cursor() as cursor:
        cursor.execute("DROP FUNCTION uid_next_id() CASCADE")
    with pytest.raises(CommandError, match="shard_2: missing function uid_next_id"):
        run("check-db")
    fixed = run("check-db", "--fix")
    assert "shard_2          uid_next_id() fixed" in fixed
    assert run("check-db").count(" ok") == len(settings.SHARDS)


def test_check_db_reports_non_postgres_or_nothing() -> None:
    if settings.DATABASE_IDS:
        pytest.skip("covered by test_check_db_verifies_every_shard")
    assert "no database-generated ids" in run("check-db")


def test_migrate_all_shows_progress() -> None:
    out = run("migrate-all")
    every = len(settings.SHARDS) + 2  # default, the shards, and the incoming spare
    assert "all databases migrated" in out and f"{every}/{every}" in out
    assert f"migrating {settings.SPARE}" in out


@pytest.mark.skipif(
    not settings.DATABASE_IDS, reason="the functions live on PostgreSQL shards (Django 5.0+)"
)
def test_check_db_finds_a_state_ahead_of_the_clock_and_resets_it_when_safe() -> None:
    from django.db import connections

    from uid_fields.django import get_generator

    layout = get_generator("photos").layout
    half_a_day = 43_200_000
    with connections["shard_1"].cursor() as cursor:
        # What a clock half a day ahead for a while left behind: the state (ids were
        # issued, not stored) runs half a day ahead of real time.
        cursor.execute(
            "SELECT setval('uid_next_id_state', "
            f"((uid_next_id_clock() + {half_a_day} - {layout.epoch_ms}) "
            f"/ {layout.time_unit_ms}) << {layout.sequence_bits})"
        )
    with pytest.raises(CommandError, match=r"shard_1: state 43\d{3}(\.\d+)? s ahead"):
        run("check-db")
    fixed = run("check-db", "--fix")
    assert "shard_1          uid_next_id() state reset to now" in fixed
    assert run("check-db").count(" ok") == len(settings.SHARDS)
