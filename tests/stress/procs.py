"""Code that the stress tests run in spawned processes (importable by the children)."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

from uid_fields import TWITTER, DatabaseLease, RedisLease, RedisSequence, SnowflakeGenerator
from uid_fields.config import build_generator


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
