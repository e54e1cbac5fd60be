"""The database and Redis benchmarks at toy sizes, in a subprocess (they configure
Django their own way), against the real servers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import services

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.bench


@pytest.mark.services
def test_database_and_redis_benchmarks_run() -> None:
    for connect in (services.postgres_connection, services.mysql_connection):
        connect().close()
    services.redis_client().close()
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.benchmarks",
            "--quick",
            "--no-write",
            "--only",
            "pg,mysql,django,redis",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    for title in (
        "SQLAlchemy Core insert",
        "primary key index",
        "database-side ids",
        "Django bulk_create",
        "Django get()",
        "rows (batches of 10,000), MariaDB",
        "SQLAlchemy flush of",
        "SQLAlchemy get() against fan-out",
        "pgbench SELECT next_id() (PL/pgSQL, the default), 8 clients",
        "pgbench SELECT next_id() in C (opt-in), 1 client",
        "next_id() in C (opt-in) calls/s >= Instagram's original (pgbench, 8 clients)",
        "bulk INSERT with the next_id() in C (opt-in) default",
        "Redis",
        "Targets",
        "(pgbench, 1 client)",
        "SQLAlchemy flush with database-side ids",
        "SQLAlchemy fan-out over 8 PostgreSQL shards",
        "identity in time (MariaDB)",
        "Django bulk_create of 50 new objects per call",
        "SQLAlchemy flush of 50 new objects per call",
        "Django keyed bulk_create(50) <= 1.25x plain",
        "Django Snowflake bulk_create(50) over 4 shards <= 1.15x",
        "SQLAlchemy keyed flush of 50 objects <= 1.25x",
    ):
        assert title in process.stdout, title
    assert "skipped" not in process.stderr
