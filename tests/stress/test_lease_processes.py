"""8 spawned processes x 4 threads leasing worker ids from one coordinator."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests import services
from tests.redis_servers import key_prefix
from tests.stress.procs import BARRIER, QUEUE, leased_worker, run_together
from uid_fields import TWITTER, DatabaseLease

PROCESSES, THREADS, PER_THREAD = 8, 4, 2500


def run_processes(kind: str, target: str, prefix: str = "", table: str = "") -> list[Any]:
    name = f"stress-{uuid.uuid4().hex[:8]}"
    args = (kind, target, name, prefix, table, BARRIER, QUEUE, THREADS, PER_THREAD)
    return run_together(leased_worker, args, PROCESSES)


def check(results: list[Any]) -> None:
    errors = [r["error"] for r in results if "error" in r]
    assert not errors, errors
    workers = sorted(r["worker"] for r in results)
    assert workers == list(range(PROCESSES))  # 8 distinct ids, the lowest ones
    ids = [i for r in results for i in r["ids"]]
    assert len(ids) == PROCESSES * THREADS * PER_THREAD
    assert len(set(ids)) == len(ids)  # zero duplicates
    for result in results:
        assert {TWITTER.decompose(i).worker for i in result["ids"]} == {result["worker"]}


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def test_redis_leases_in_8_processes_x_4_threads(prefix: str) -> None:
    services.redis_client().close()
    check(run_processes("redis", services.REDIS_URL, prefix=prefix))


def test_postgres_leases_in_8_processes_x_4_threads() -> None:
    conn = services.postgres_connection()
    table = f"uidf_stress_{uuid.uuid4().hex[:10]}"
    DatabaseLease(services.POSTGRES_URL, "setup", table=table).create_table()
    try:
        check(run_processes("database", services.POSTGRES_URL, table=table))
        free = conn.execute(
            f"SELECT count(*) FROM {table} WHERE token IS NULL AND node >= 0"
        ).fetchone()
        assert free is not None and free[0] == 32  # all released at the end
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()
