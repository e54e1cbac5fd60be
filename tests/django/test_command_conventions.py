"""``manage.py uid_fields`` follows Django's conventions: ``-v`` after the subcommand,
silence at ``-v 0``, ``migrate``'s own options on ``migrate-all``, help on every option,
and an unknown database alias as a ``CommandError`` naming the known ones."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder
from django.test.utils import override_settings

from tests.django.opsapp.models import Ledger
from uid_fields.django.management.commands.uid_fields import Command

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

EVERY = ["default", *settings.SHARDS, settings.SPARE]
BACKFILL = override_settings(
    MIGRATION_MODULES={"opsapp": "tests.django.opsapp.backfill_migrations"}
)


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("uid_fields", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def applied(alias: str) -> set[tuple[str, str]]:
    return set(MigrationRecorder(connections[alias]).applied_migrations())


@pytest.fixture
def forget_backfill() -> Iterator[None]:
    yield
    for alias in EVERY:
        MigrationRecorder(connections[alias]).record_unapplied("opsapp", "0002_backfill")


def test_verbosity_is_accepted_after_the_subcommand() -> None:
    out, _ = run("generate", "-n", "2", "-v", "0")
    assert len(out.split()) == 2
    out, _ = run("shards", "--verbosity", "2")
    assert "testapp.Order" in out


def test_migrate_all_at_verbosity_0_prints_nothing() -> None:
    out, err = run("migrate-all", "-v", "0")
    assert out == "" and err == ""
    out, _ = run("migrate-all")
    assert "all databases migrated" in out  # verbosity 1 still shows progress


@pytest.mark.usefixtures("forget_backfill")
def test_migrate_all_plan_shows_each_database_and_migrates_nothing() -> None:
    with BACKFILL:
        out, _ = run("migrate-all", "opsapp", "--plan")
    for alias in EVERY:
        assert ("opsapp", "0002_backfill") not in applied(alias)
    assert out.count("opsapp.0002_backfill") >= len(EVERY), out
    assert "FAILED" not in out


@pytest.mark.usefixtures("forget_backfill")
def test_migrate_all_passes_app_label_migration_name_and_fake() -> None:
    Ledger.objects.create(note="kept lower case")
    with BACKFILL:
        out, _ = run("migrate-all", "opsapp", "0002_backfill", "--fake")
    for alias in EVERY:
        assert ("opsapp", "0002_backfill") in applied(alias), out
    assert list(Ledger.objects.on_all_shards().values_list("note", flat=True)) == [
        "kept lower case"
    ]  # faked: the data migration did not run


def test_migrate_all_with_an_unknown_app_label_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="nosuchapp"):
        run("migrate-all", "nosuchapp")


def _options(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                for where, found in _options(child):
                    yield f"{name} {where}", found
        elif not isinstance(action, argparse._HelpAction):
            yield "/".join(action.option_strings) or action.dest, action


def test_every_option_has_help() -> None:
    parser = Command().create_parser("manage.py", "uid_fields")
    missing = [where for where, action in _options(parser) if not action.help]
    assert missing == []


@pytest.mark.parametrize(
    "args",
    [
        ["check-db", "--database", "nope"],
        ["dumpdata", "--database", "nope"],
        ["loaddata", "x.json", "--database", "nope"],
        ["resolve-prepared", "--database", "nope"],
        ["move-shards", "--map", "main", "--from", "nope", "--to", "shard_4"],
        ["move-shards", "--map", "main", "--from", "shard_3", "--to", "nope"],
    ],
)
def test_an_unknown_alias_is_a_command_error_naming_the_known_ones(args: list[str]) -> None:
    with pytest.raises(CommandError, match=r"unknown database 'nope'.*shard_0"):
        run(*args)


@pytest.mark.usefixtures("forget_backfill")
def test_migrate_all_backwards_says_what_it_unapplied_on_each_database() -> None:
    """Issue 35: going back to 0001 unapplied 0002 everywhere, and every line said "up
    to date" (only what was applied was counted)."""
    with BACKFILL:
        run("migrate-all", "opsapp", "0002_backfill", "--fake")
        out, _ = run("migrate-all", "opsapp", "0001_initial", "--fake")
    for alias in EVERY:
        assert ("opsapp", "0002_backfill") not in applied(alias), out
    lines = [line for line in out.splitlines() if line.split(" ", 1)[0] in EVERY]
    assert len(lines) == len(EVERY), out
    for line in lines:
        assert "unapplied 1: opsapp.0002_backfill" in line, out
        assert "up to date" not in line, out
