"""Each test run names its databases apart, so runs on one server never drop each other's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _names(namespace: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "UID_FIELDS_TEST_NAMESPACE"}
    if namespace is not None:
        env["UID_FIELDS_TEST_NAMESPACE"] = namespace
    code = "from tests.services import database_name; print(database_name('uidf_sa', 0))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    ).stdout.strip()


def test_two_runs_without_a_namespace_use_different_databases() -> None:
    first, second = _names(None), _names(None)
    assert first != second and first != "uidf_sa_0" and second != "uidf_sa_0"


def test_a_namespace_given_is_kept() -> None:
    assert _names("ci") == "uidf_sa_ci_0"
