"""A lease coordinator that loses every live lease mid-run gives no worker id away.

8 spawned processes start 0.4 s apart and make ids at a steady pace until the end. Mid-run the
coordinator loses its state: a throwaway Redis is killed and restarted empty, or every
row of the PostgreSQL lease table is deleted (what a restore or a failover does).
Holders re-take their own ids; processes that claim afterwards wait out the quarantine.
Zero duplicates in at least 5 M ids; the errors the application saw are printed.
"""

from __future__ import annotations

import time
import uuid
from array import array
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from tests import services
from tests.redis_servers import redis_server
from tests.stress.procs import LOSS_MARGIN, LOSS_TTL, lease_loss_worker
from uid_fields import DatabaseLease

PROCESSES, STAGGER, CAP, RUN = 8, 0.4, 1_500_000, 8.0
MINIMUM = 5_000_000


def run(kind: str, target: str, table: str, tmp_path: Path, fault: Callable[[], None]) -> None:
    name = f"loss-{uuid.uuid4().hex[:8]}"
    outs = [str(tmp_path / f"ids-{i}.bin") for i in range(PROCESSES)]
    with ProcessPoolExecutor(PROCESSES, mp_context=get_context("spawn")) as pool:
        t0 = time.time() + 3.0  # time for the spawned interpreters to import
        futures = [
            pool.submit(
                lease_loss_worker,
                *(kind, target, name, table, t0 + i * STAGGER, t0 + RUN, outs[i], CAP),
            )
            for i in range(PROCESSES)
        ]
        time.sleep(max(0.0, t0 + 1.5 - time.time()))  # 4 processes are issuing ids
        fault()
        results: list[dict[str, Any]] = [f.result(timeout=120) for f in futures]
    ids: array[int] = array("q")
    for out in outs:
        with open(out, "rb") as file:
            ids.frombytes(file.read())
    total, distinct = len(ids), len(set(ids))
    lost = sum(r["lost"] for r in results)
    print(
        f"\nlease loss ({kind}): {total:,} ids from {PROCESSES} processes, "
        f"{total - distinct} duplicates; LeaseLostError raised {lost} times; "
        f"CoordinatorUnavailableError at start {sum(r['unavailable'] for r in results)} times; "
        f"claims {[r['claims'] for r in results]}, quarantined "
        f"{sum(r['quarantines'] for r in results)}"
    )
    assert total >= MINIMUM, results
    assert distinct == total  # zero duplicates


def test_redis_killed_and_restarted_empty_mid_run(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        time.sleep(LOSS_TTL + LOSS_MARGIN)  # past a new server's quarantine

        def fault() -> None:
            server.kill()
            time.sleep(0.5)  # process 4 starts while it is down
            server.start()

        run("redis", server.url, "", tmp_path, fault)


def test_postgres_lease_rows_deleted_mid_run(tmp_path: Path) -> None:
    conn = services.postgres_connection()
    table = f"uidf_loss_{uuid.uuid4().hex[:10]}"
    DatabaseLease(services.POSTGRES_URL, "setup", table=table).create_table()
    try:
        run(
            "database",
            services.POSTGRES_URL,
            table,
            tmp_path,
            lambda: conn.execute(f"DELETE FROM {table}"),
        )
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()
