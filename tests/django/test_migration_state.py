"""Migrations over default and the shards: which database is behind, what migrate-all did
on each, and data migrations (RunPython) that reach every shard's rows."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.conf import settings
from django.core import checks
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import CaptureQueriesContext, override_settings

from tests.django.opsapp.models import Ledger
from uid_fields.django import ShardRouter

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__", transaction=True)]

EVERY = ["default", *settings.SHARDS, settings.SPARE]
BEHIND = "uid_fields.W003"


def recorder(alias: str) -> MigrationRecorder:
    return MigrationRecorder(connections[alias])


def run(*args: str) -> str:
    out = StringIO()
    call_command("uid_fields", *args, stdout=out)
    return out.getvalue()


def line_of(output: str, alias: str) -> str:
    """The summary line of one database (it starts with the alias)."""
    found = [line for line in output.splitlines() if line.split(" ", 1)[0] == alias]
    assert len(found) == 1, output
    return found[0]


@pytest.fixture
def shard_2_behind() -> Iterator[None]:
    """shard_2 as if `migrate` had run on default only since opsapp.0001 was added."""
    recorder("shard_2").record_unapplied("opsapp", "0001_initial")
    yield
    recorder("shard_2").record_applied("opsapp", "0001_initial")


@pytest.fixture
def forget_second_migration() -> Iterator[None]:
    """The test migrations named 0002 are not left recorded for the next test."""
    yield
    for alias in EVERY:
        for name in ("0002_backfill", "0002_fails_on_shard_1"):
            recorder(alias).record_unapplied("opsapp", name)


def behind(databases: list[str] | None) -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(databases=databases) if m.id == BEHIND]


# -- (a) shards behind default: a check with databases=, and migrate-all --check ---------


@pytest.mark.usefixtures("shard_2_behind")
def test_the_check_names_the_shard_behind_default_and_what_it_lacks() -> None:
    found = behind(["default"])  # what `manage.py check --database default` asks
    assert len(found) == 1, found
    assert isinstance(found[0], checks.Warning)  # never blocks `migrate`, which fixes it
    assert "shard_2" in found[0].msg and "opsapp.0001_initial" in found[0].msg
    assert "migrate-all" in (found[0].hint or "")
    assert len(behind(["shard_2"])) == 1
    assert behind(["shard_3"]) == []  # asked about another shard only


@pytest.mark.usefixtures("shard_2_behind")
def test_plain_check_reads_no_database() -> None:
    contexts = [CaptureQueriesContext(connections[alias]) for alias in EVERY]
    for context in contexts:
        context.__enter__()
    try:
        assert behind(None) == []
    finally:
        for context in contexts:
            context.__exit__(None, None, None)
    assert [len(c.captured_queries) for c in contexts] == [0] * len(EVERY)


@pytest.mark.usefixtures("shard_2_behind")
def test_manage_py_check_with_a_database_prints_it() -> None:
    out, err = StringIO(), StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=err)
    assert BEHIND in out.getvalue() + err.getvalue()


@pytest.mark.usefixtures("shard_2_behind")
def test_plain_migrate_says_which_shards_it_left_behind() -> None:
    out = StringIO()
    call_command("migrate", database="default", verbosity=1, stdout=out)
    text = out.getvalue()
    assert "shard_2" in text and "migrate-all" in text, text
    assert "shard_3" not in text
    quiet = StringIO()
    call_command("migrate", database="default", verbosity=0, stdout=quiet)
    assert quiet.getvalue() == ""


def test_every_database_up_to_date_passes_migrate_all_check() -> None:
    out = run("migrate-all", "--check")
    for alias in EVERY:
        assert "up to date" in line_of(out, alias)


@pytest.mark.usefixtures("shard_2_behind")
def test_migrate_all_check_fails_listing_each_shard_and_what_it_lacks() -> None:
    out = StringIO()
    with pytest.raises(CommandError, match="shard_2") as raised:
        call_command("uid_fields", "migrate-all", "--check", stdout=out)
    assert raised.value.returncode == 1
    assert "opsapp.0001_initial" in line_of(out.getvalue(), "shard_2")
    assert "up to date" in line_of(out.getvalue(), "shard_3")
    # --check changes nothing
    assert ("opsapp", "0001_initial") not in recorder("shard_2").applied_migrations()


# -- (b) migrate-all: a summary per database, non-zero when one failed -------------------


@pytest.mark.usefixtures("forget_second_migration")
def test_migrate_all_goes_on_after_a_failed_shard_and_says_where_each_stopped() -> None:
    out = StringIO()
    with (
        override_settings(MIGRATION_MODULES={"opsapp": "tests.django.opsapp.failing_migrations"}),
        pytest.raises(CommandError, match="shard_1") as raised,
    ):
        call_command("uid_fields", "migrate-all", stdout=out)
    assert raised.value.returncode == 1
    text = out.getvalue()
    failed = line_of(text, "shard_1")
    assert "FAILED" in failed and "opsapp.0002_fails_on_shard_1" in failed
    assert "a row of shard_1 cannot be converted" in failed
    assert "opsapp.0001_initial" in failed  # where it stopped
    for alias in ["default", "shard_0", "shard_2", "shard_3", settings.SPARE]:
        assert "OK" in line_of(text, alias), text
        assert ("opsapp", "0002_fails_on_shard_1") in recorder(alias).applied_migrations()
    # the shards after the failed one were migrated too
    assert ("opsapp", "0002_fails_on_shard_1") not in recorder("shard_1").applied_migrations()


# -- (c) Django's documented RunPython pattern, on every shard, without hints -----------


@pytest.mark.usefixtures("forget_second_migration")
def test_a_data_migration_reaches_the_rows_of_every_shard() -> None:
    # Rows land on shards by their random ids: made until every shard holds some (24 at
    # first left a shard empty in about 0.4% of runs), at most 400.
    rows = [Ledger.objects.create(note=f"row {i}") for i in range(24)]
    while {row._state.db for row in rows} != set(settings.SHARDS) and len(rows) < 400:
        rows.append(Ledger.objects.create(note=f"row {len(rows)}"))
    assert {row._state.db for row in rows} == set(settings.SHARDS)
    with override_settings(MIGRATION_MODULES={"opsapp": "tests.django.opsapp.backfill_migrations"}):
        out = run("migrate-all")
    assert "OK" in line_of(out, "default")
    notes = sorted(Ledger.objects.on_all_shards().values_list("note", flat=True))
    assert notes == sorted(f"ROW {i}" for i in range(len(rows)))
    assert "left behind" not in out  # migrate-all's own runs of migrate say nothing


def test_hintless_operations_follow_the_models_of_their_app() -> None:
    """RunPython and RunSQL without hints ask ``allow_migrate(db, app_label)``: an app
    whose models all live on the shards runs them there, an app of ordinary models on
    default; an app of both cannot tell, and says nothing (the docs give the hint)."""
    router = ShardRouter()
    assert router.allow_migrate("default", "opsapp") is False
    assert all(router.allow_migrate(alias, "opsapp") for alias in settings.SHARDS)
    assert router.allow_migrate(settings.SPARE, "opsapp") is True  # incoming: migrated
    assert router.allow_migrate("shard_0", "auth") is False
    assert router.allow_migrate("default", "auth") is None
    assert router.allow_migrate("shard_0", "testapp") is None  # both kinds of models
    # what the docs tell an app of both kinds to write: hints={"model_name": ...}
    assert router.allow_migrate("default", "testapp", model_name="order") is False
    assert router.allow_migrate("shard_0", "testapp", model_name="order") is True
