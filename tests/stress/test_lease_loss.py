"""A lease coordinator that loses every live lease mid-run gives no worker id away.

8 spawned processes make ids through leases while the coordinator loses its state: a
throwaway Redis is killed and restarted empty, or every row of the PostgreSQL lease
table is deleted (what a restore or a failover does). Four processes hold their leases
across the fault and re-take their own ids; four more start during it and wait out the
quarantine. The run goes by count, not by time: the first four issue ids until the fault
is over and a fixed count more, the others a fixed count, however slow the machine. The
test asserts what must hold on any machine: every id was issued, none twice, and the
first four issued ids on both sides of the fault. The errors the application saw are
printed.
"""

from __future__ import annotations

import os
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
from uid_fields import TWITTER, DatabaseLease

PROCESSES, COUNT, STAGGER = 8, 100_000, 0.2
BEFORE = PROCESSES // 2  # processes holding a lease when the fault strikes
START_TIMEOUT_S = 180  # spawned interpreters on a loaded machine import slowly


def touch(path: Path) -> None:
    path.write_text("")


def run(kind: str, target: str, table: str, tmp_path: Path, fault: Callable[[], None]) -> None:
    name = f"loss-{uuid.uuid4().hex[:8]}"
    signals = tmp_path / "signals"
    signals.mkdir()
    outs = [str(tmp_path / f"ids-{i}.bin") for i in range(PROCESSES)]
    with ProcessPoolExecutor(PROCESSES, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(
                lease_loss_worker,
                *(kind, target, name, table, "before" if i < BEFORE else "during"),
                *(str(signals), outs[i], COUNT, (i - BEFORE) * STAGGER),
            )
            for i in range(PROCESSES)
        ]
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(os.path.exists(out + ".running") for out in outs[:BEFORE]):
            assert time.monotonic() < deadline, "the first processes did not start issuing"
            assert not any(f.done() for f in futures), [f.result() for f in futures if f.done()]
            time.sleep(0.05)
        began_ms = time.time() * 1000
        touch(signals / "faulted")  # the other processes start claiming now
        fault()
        ended_ms = time.time() * 1000
        touch(signals / "restored")
        results: list[dict[str, Any]] = [f.result(timeout=600) for f in futures]
    per_process = []
    for out in outs:
        ids: array[int] = array("q")
        with open(out, "rb") as file:
            ids.frombytes(file.read())
        per_process.append(ids)
    total = sum(len(ids) for ids in per_process)
    distinct = len({i for ids in per_process for i in ids})
    print(
        f"\nlease loss ({kind}): {total:,} ids from {PROCESSES} processes, "
        f"{total - distinct} duplicates; LeaseLostError raised "
        f"{sum(r['lost'] for r in results)} times; CoordinatorUnavailableError at start "
        f"{sum(r['unavailable'] for r in results)} times; claims "
        f"{[r['claims'] for r in results]}, quarantined {sum(r['quarantines'] for r in results)}"
    )
    assert [len(ids) for ids in per_process] == [r["count"] for r in results]
    assert all(r["count"] >= COUNT for r in results), results
    assert distinct == total  # zero duplicates
    for ids in per_process[:BEFORE]:  # these held a lease through the fault
        stamps = [TWITTER.decompose(i).timestamp_ms for i in (min(ids), max(ids))]
        assert stamps[0] < began_ms and stamps[1] > ended_ms, (stamps, began_ms, ended_ms)


def test_redis_killed_and_restarted_empty_mid_run(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        time.sleep(LOSS_TTL + LOSS_MARGIN)  # past a new server's quarantine

        def fault() -> None:
            server.kill()
            time.sleep(0.5)  # the later processes start while it is down
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
