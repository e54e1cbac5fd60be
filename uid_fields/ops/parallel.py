"""One call per shard at the same time, on a bounded pool of threads; results in order.

A fan-out over eight databases that runs one query after another waits for eight round
trips; run together, it waits for about one. The adapters decide *whether* a fan-out may
run in parallel (never inside a transaction, never on connections that cannot be shared);
this module only runs the calls: on at most ``workers`` threads shared by the process,
waiting for every call before raising the first error (in shard order), so no query is
left running behind an exception. A call made from one of the pool's own threads runs
its calls one after another instead of waiting on the pool it occupies.

A call that fails is logged on ``uid_fields.fanout`` (WARNING, naming its shard) before
the error goes up: a fan-out's exception names one shard, the log each one that failed.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import suppress
from typing import TypeVar

from .._internal import forks
from .._internal import validate as check

__all__ = ["DEFAULT_WORKERS", "in_worker", "run_per_shard", "set_workers", "shutdown"]

T = TypeVar("T")

log = logging.getLogger("uid_fields.fanout")

#: Threads shared by every fan-out of the process (each holds its own connections).
DEFAULT_WORKERS = 8

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_workers = DEFAULT_WORKERS
_local = threading.local()
_at_exit: list[Callable[[], None]] = []


def set_workers(count: int) -> None:
    """Bound the pool (0 makes every fan-out sequential); takes effect for new pools."""
    global _workers
    _workers = check.integer("workers", count, 0, 256)
    shutdown()


def workers() -> int:
    return _workers


def in_worker() -> bool:
    """Whether the current thread is one of the pool's."""
    return bool(getattr(_local, "worker", False))


def on_worker_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` in each worker thread when the pool shuts down (closing the
    connections a worker opened, for example)."""
    _at_exit.append(hook)


def _mark_worker() -> None:
    _local.worker = True


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=_workers,
                thread_name_prefix="uid_fields-fanout",
                initializer=_mark_worker,
            )
        return _pool


def run_per_shard(
    calls: Sequence[Callable[[], T]],
    *,
    parallel: bool = True,
    names: Sequence[str] | None = None,
) -> list[T]:
    """The results of ``calls``, in order; run at the same time when ``parallel``, there
    is more than one, the pool has workers and this is not already a worker thread.

    ``names`` (one per call: the shards' databases) name the failures in the log."""
    if names is not None and len(names) != len(calls):
        raise ValueError(f"{len(calls)} calls need {len(calls)} names, got {len(names)}")
    shown = list(names) if names is not None else [f"#{i}" for i in range(len(calls))]
    calls = [_logged(call, name) for call, name in zip(calls, shown, strict=True)]
    if not parallel or len(calls) < 2 or _workers == 0 or in_worker():
        return [call() for call in calls]
    # Each call runs in a copy of the caller's context: what the request set (its
    # read-your-writes pins, a pinned shard) holds in the workers too.
    futures = [_executor().submit(contextvars.copy_context().run, call) for call in calls]
    wait(futures)
    return [future.result() for future in futures]


def _logged(call: Callable[[], T], name: str) -> Callable[[], T]:
    def run() -> T:
        try:
            return call()
        except Exception as exc:
            log.warning("fan-out: the query on %s failed (%s: %s)", name, type(exc).__name__, exc)
            raise

    return run


def shutdown() -> None:
    """Stop the pool after its running calls; the next fan-out starts a new one.

    Each worker first runs the ``on_worker_exit`` hooks (its connections are its own and
    can only be closed from its thread)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is None:
        return
    if _at_exit:
        count = getattr(pool, "_max_workers", _workers)
        barrier = threading.Barrier(count)

        def close() -> None:
            with suppress(threading.BrokenBarrierError):
                barrier.wait(5)  # holds each worker thread until every one has a task
            for hook in _at_exit:
                hook()

        futures = [pool.submit(close) for _ in range(count)]
        wait(futures, timeout=10)
    pool.shutdown(wait=True)


def _reset_after_fork() -> None:
    # The parent's threads do not exist in the child: start a new pool there on demand.
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


forks.on_fork(_reset_after_fork)
