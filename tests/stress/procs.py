"""Code that the stress tests run in spawned processes (importable by the children)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from array import array
from typing import Any

import redis
from sqlalchemy import create_engine

from tests.php_fleet import FIXED_LUA, POST_LUA, php_next_id
from tests.sqlalchemy.models import Order
from uid_fields import (
    PHP_REDIS,
    TWITTER,
    CoordinatorUnavailableError,
    DatabaseLease,
    LeaseLostError,
    RedisLease,
    RedisSequence,
    SnowflakeGenerator,
)
from uid_fields.config import build_generator
from uid_fields.sqlalchemy import sharded_session


def make_lease(kind: str, target: str, name: str, prefix: str, table: str) -> Any:
    if kind == "redis":
        return RedisLease(target, name, ttl=10, prefix=prefix)
    return DatabaseLease(target, name, ttl=10, table=table)


def in_threads(threads: int, work: Any) -> list[int]:
    results: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        try:
            results[slot] = work()
        except BaseException as exc:  # reported to the parent
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]
    return [i for r in results for i in r]


def leased_worker(
    kind: str,
    target: str,
    name: str,
    prefix: str,
    table: str,
    barrier: Any,
    queue: Any,
    threads: int,
    per_thread: int,
) -> None:
    """One process: lease a worker id, make ids in threads, hold the lease until all did."""
    try:
        lease = make_lease(kind, target, name, prefix, table)
        gen = SnowflakeGenerator(TWITTER, datacenter=1, worker=lease)

        def work() -> list[int]:
            ids = [gen.next_id() for _ in range(per_thread // 2)]
            while len(ids) < per_thread:
                ids += gen.next_ids(min(250, per_thread - len(ids)))
            return ids

        ids = in_threads(threads, work)
        barrier.wait(60)  # every process holds its lease at the same time
        queue.put({"worker": gen.node["worker"], "ids": ids})
        barrier.wait(60)
        lease.release()
    except BaseException as exc:
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def shared_sequence_worker(
    url: str, prefix: str, barrier: Any, queue: Any, singles: int, blocks: int
) -> None:
    """One process of many sharing worker 5 through RedisSequence."""
    try:
        gen = SnowflakeGenerator(TWITTER, worker=5, sequence=RedisSequence(url, prefix=prefix))
        barrier.wait(60)  # start together so the processes contend for the same units
        ids = [gen.next_id() for _ in range(singles)]
        for _ in range(blocks):
            ids += gen.next_ids(5000)  # more than a unit holds: spills into later units
        queue.put({"ids": ids})
    except BaseException as exc:
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def sharded_settings_worker(
    config: dict[str, Any], shard: int, barrier: Any, queue: Any, singles: int, blocks: int
) -> None:
    """One process of several making ids of one logical shard from a settings entry."""
    try:
        gen = build_generator("orders", config)
        barrier.wait(60)  # start together so the processes contend for the same units
        ids = [gen.next_id(shard=shard) for _ in range(singles)]  # type: ignore[call-arg]
        for _ in range(blocks):
            ids += gen.next_ids(5000, shard)  # type: ignore[call-arg]
        queue.put({"ids": ids})
    except BaseException as exc:
        queue.put({"error": f"{type(exc).__name__}: {exc}"})


def run_together(target: Any, args: tuple[Any, ...], processes: int) -> list[dict[str, Any]]:
    """Start ``processes`` spawned workers that meet at one barrier; their reports.

    ``BARRIER`` and ``QUEUE`` in ``args`` stand for the shared barrier and result queue.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(processes), ctx.Queue()
    filled = tuple(barrier if a is BARRIER else queue if a is QUEUE else a for a in args)
    procs = [ctx.Process(target=target, args=filled) for _ in range(processes)]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=180) for _ in procs]
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0, proc.exitcode
    return results


BARRIER, QUEUE = object(), object()


def lease_loss_worker(
    kind: str,
    target: str,
    name: str,
    table: str,
    group: str,
    signals: str,
    out: str,
    count: int,
    stagger: float,
) -> dict[str, Any]:
    """One process of the lease-loss runs, by count, not by time.

    ``group="before"``: claim at once and make ids (paced) across the fault until the
    coordinator is back (the file ``<signals>/restored``), then ``count`` more.
    ``group="during"``: wait for the fault (``<signals>/faulted``) and ``stagger`` seconds,
    claim at the first id (retrying while the coordinator is down, as an application would),
    then make ``count`` ids. ``<out>.running`` appears after the first batch; every error
    the application would see is counted; the ids go to ``out`` (int64, native order)."""
    faulted, restored = os.path.join(signals, "faulted"), os.path.join(signals, "restored")
    if group == "during":
        while not os.path.exists(faulted):
            time.sleep(0.01)
        time.sleep(stagger)
    unavailable = lost = 0
    if kind == "redis":
        lease: Any = RedisLease(target, name, ttl=LOSS_TTL, margin=LOSS_MARGIN)
    else:
        lease = DatabaseLease(target, name, ttl=LOSS_TTL, margin=LOSS_MARGIN, table=table)
    # Built without the coordinator: the lease claims at the first id.
    gen = SnowflakeGenerator(TWITTER, datacenter=2, worker=lease)
    ids = array("q")
    while True:  # an application retrying its first id while the coordinator is down
        try:
            ids.append(gen.next_id())
            break
        except CoordinatorUnavailableError:
            unavailable += 1
            time.sleep(0.1)
    goal = count if group == "during" else None
    running = False
    began = time.monotonic()
    while goal is None or len(ids) < goal:
        if goal is None and os.path.exists(restored):
            goal = len(ids) + count
        if len(ids) > LOSS_RATE * (time.monotonic() - began):
            time.sleep(0.001)  # paced: ids keep coming across the fault
            continue
        try:
            ids.extend(gen.next_ids(min(1000, (goal or len(ids) + 1000) - len(ids))))
        except LeaseLostError:
            lost += 1
            time.sleep(0.01)
            continue
        if not running:  # after the first batch
            open(out + ".running", "w").close()
            running = True
    with open(out, "wb") as file:
        ids.tofile(file)
    result = {
        "count": len(ids),
        "lost": lost,
        "unavailable": unavailable,
        "claims": lease.claims,
        "quarantines": lease.quarantines,
    }
    lease.release()
    return result


LOSS_TTL, LOSS_MARGIN = 3.0, 0.6
LOSS_RATE = 50_000  # ids per second and process, at most


def php_fleet_worker(
    role: str, url: str, mode: str, server: int, worker: int, start_at: float, count: int
) -> bytes:
    """One member of a PHP+Redis fleet; its ids as packed int64.

    ``role``: ``"php"`` (the post's Lua script), ``"php-fixed"`` (the same with a 10 s
    expiry) or ``"python"`` (``RedisSequence(url, mode=mode)``).
    """
    if role.startswith("php"):
        client = redis.Redis.from_url(url)
        script = client.register_script(POST_LUA if role == "php" else FIXED_LUA)
        time.sleep(max(0.0, start_at - time.time()))
        ids = array("q", (php_next_id(script, server, worker) for _ in range(count)))
        return ids.tobytes()
    sequence = RedisSequence(url, mode=mode)  # type: ignore[arg-type]
    gen = SnowflakeGenerator(PHP_REDIS, server=server, worker=worker, sequence=sequence)
    time.sleep(max(0.0, start_at - time.time()))
    ids = array("q")
    while len(ids) < count:  # one id per request, and now and then a bulk insert
        ids.extend(gen.next_id() for _ in range(20))
        ids.extend(gen.next_ids(min(20, count - len(ids))))
    return ids[:count].tobytes()


def two_phase_kill_worker(urls: dict[str, str], stage: str, ids_file: str) -> None:
    """Write 40 orders over 4 PostgreSQL shards by two-phase commit and die (SIGKILL)
    when the commit reaches ``stage``; the ids go to ``ids_file`` first."""
    engines = {name: create_engine(url) for name, url in urls.items()}
    session = sharded_session(engines, two_phase=True)

    def die(reached: str) -> None:
        if reached == stage:
            os.kill(os.getpid(), signal.SIGKILL)

    session.on_two_phase_stage = die
    orders = [Order(customer=f"c{i}") for i in range(40)]
    with open(ids_file, "w") as file:
        file.write(" ".join(str(o.id) for o in orders))
    session.add_all(orders)
    session.commit()
