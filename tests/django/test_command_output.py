"""``manage.py uid_fields``'s output as a shell uses it: a reader that leaves early, a
full disk, ``-v 0``, and ``decode`` of several ids and of standard input.

The pipe and the full disk run ``django-admin`` in a process of its own, with a small
project, as a shell would: ``call_command`` into a StringIO never fails to write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.django.testapp.models import Order, Photo
from uid_fields.django import allow_off_shard_writes
from uid_fields.django.management.commands.uid_fields import Command

ROOT = Path(__file__).resolve().parents[2]

#: A project of one SQLite database and one generator: what ``generate`` needs.
SETTINGS = textwrap.dedent(
    """
    SECRET_KEY = "tests-only"
    USE_TZ = True
    INSTALLED_APPS = ["django.contrib.contenttypes", "uid_fields.django"]
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    UID_FIELDS = {
        "GENERATORS": {
            "default": {
                "kind": "snowflake",
                "layout": "twitter",
                "epoch": "2024-01-01T00:00:00Z",
                "fields": {"datacenter": 0, "worker": 1},
            }
        }
    }
    """
)


@pytest.fixture
def manage(tmp_path: Path) -> list[str]:
    """``django-admin`` of that project, as an argv prefix."""
    (tmp_path / "output_settings.py").write_text(SETTINGS, encoding="utf-8")
    return [sys.executable, "-m", "django", "uid_fields", "--settings", "output_settings"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    return env


def test_a_reader_that_leaves_early_ends_generate_quietly(
    manage: list[str], tmp_path: Path
) -> None:
    """``manage.py uid_fields generate -n 100000 | head -1``: no BrokenPipeError
    traceback, and status 141 (128 + SIGPIPE), as the standalone ``uid-fields``."""
    process = subprocess.Popen(
        [*manage, "generate", "-n", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    assert process.wait(60) == 141, err.decode()
    assert int(first) > 0
    assert err == b""


def test_a_full_disk_is_an_error_without_a_traceback(manage: list[str], tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*manage, "generate", "-n", "10"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(tmp_path),
            cwd=tmp_path,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr == "CommandError: cannot write the output: No space left on device\n"


def test_decode_reads_ids_from_standard_input(manage: list[str], tmp_path: Path) -> None:
    ids = subprocess.run(
        [*manage, "generate", "-n", "3"],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        timeout=60,
        check=True,
    ).stdout
    done = subprocess.run(
        [*manage, "decode", "-", "--json", "--generator", "default"],
        input=ids,
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    decoded = [json.loads(line) for line in done.stdout.splitlines()]
    assert [d["id"] for d in decoded] == [int(i) for i in ids.split()]
    assert {d["worker"] for d in decoded} == {1}


def run(*args: str, stdin: str | None = None) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    extra = {} if stdin is None else {"stdin": StringIO(stdin)}
    call_command("uid_fields", *args, stdout=out, stderr=err, **extra)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db(databases="__all__")
def test_decode_takes_several_ids_and_each_reading_is_one_json_line() -> None:
    first, second = Order(), Order()
    out, _ = run("decode", str(first.pk), str(second.pk), "--json", "--generator", "default")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [first.pk, second.pk]
    out, _ = run("decode", "-", "--generator", "default", stdin=f"{first.pk} {second.pk}\n")
    assert out.count("datetime") == 2


@pytest.mark.django_db(databases="__all__")
def test_decode_of_several_ids_names_each_bad_one_and_fails_at_the_end() -> None:
    order = Order()
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 of 2 ids"):
        call_command(
            "uid_fields", "decode", "abc", str(order.pk), "--generator", "default",
            stdout=out, stderr=err,
        )  # fmt: skip
    assert "'abc'" in err.getvalue() and "datetime" in out.getvalue()


def test_decode_help_shows_what_it_decodes_with_by_default() -> None:
    parser = Command().create_parser("manage.py", "uid_fields")
    decode = next(
        action.choices["decode"]
        for action in parser._actions
        if getattr(action, "choices", None) and "decode" in action.choices  # type: ignore[operator]
    )
    help_text = " ".join(decode.format_help().split())
    assert "'-'" in help_text and "standard input" in help_text
    assert "(default: every configured generator" in help_text


@pytest.mark.django_db(databases="__all__")
def test_audit_at_verbosity_0_prints_only_what_is_misplaced() -> None:
    Photo.objects.create(owner_id=1)
    out, _ = run("audit", "testapp.Photo", "-v", "0")
    assert out == ""  # -v 1 prints each database's count and the all-clear
    assert "every row is on its shard" in run("audit", "testapp.Photo")[0]
    stray = Photo(owner_id=2)
    placement = Photo._meta.pk.placement  # type: ignore[union-attr]
    wrong = next(a for a in placement.databases if a != placement.database_of(stray.pk))
    with allow_off_shard_writes():
        stray.save(using=wrong)
    out = StringIO()
    with pytest.raises(CommandError, match="1 rows are stored off their shard"):
        call_command("uid_fields", "audit", "testapp.Photo", "-v", "0", stdout=out)
    assert out.getvalue().splitlines() == [
        line for line in out.getvalue().splitlines() if "1 misplaced" in line
    ]
    assert str(stray.pk) in out.getvalue()
