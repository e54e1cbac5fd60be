"""The pytest plugin for users' own suites (``uid_fields.django.testing``): a sample
suite that fans out in parallel runs twice in a row with ``--create-db`` on PostgreSQL
shards, leaves no test database behind, and needs no ``databases="__all__"``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests import services

ROOT = Path(__file__).resolve().parents[2]

SAMPLE = """
import pytest
from tests.django.testapp.models import Order


@pytest.mark.django_db
def test_writes_and_fans_out_without_naming_databases():
    for _ in range(8):
        Order.objects.create(note="x")
    assert Order.objects.on_all_shards().count() == 8  # parallel: the pool connects
"""


def _run(folder: Path, plugin: bool, namespace: str) -> subprocess.CompletedProcess[str]:
    (folder / "conftest.py").write_text(
        'pytest_plugins = ["uid_fields.django.testing"]\n' if plugin else ""
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "UID_FIELDS_TEST_DB": "postgres",
        "UID_FIELDS_TEST_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": "tests.django.settings",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--create-db",
            "--rootdir",
            str(folder),
            "-c",
            str(folder / "pytest.ini"),
            str(folder),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=300,
    )


def _left_behind(namespace: str) -> list[str]:
    connection = services.postgres_connection()
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"test_%{namespace}%"]
            )
            return [row[0] for row in cursor.fetchall()]
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.skipif(settings.BACKEND != "postgres", reason="runs once, in the PostgreSQL pass")
def test_a_users_suite_runs_twice_and_leaves_no_test_database(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    namespace = f"plugin{os.getpid()}"
    for _ in range(2):
        result = _run(tmp_path, plugin=True, namespace=namespace)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "being accessed by other users" not in result.stdout + result.stderr
        assert "1 passed" in result.stdout
        assert _left_behind(namespace) == []
