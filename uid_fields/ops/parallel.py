"""One call per shard at the same time, with a deadline; results in order.

A fan-out over eight databases that runs one query after another waits for eight round
trips; run together, it waits for about one. The adapters decide *whether* a fan-out may
run in parallel (never inside a transaction, never on connections that cannot be shared);
this module only runs the calls:

- **Bounded work per shard.** Each shard has a small pool of its own (``workers`` threads,
  each holding its own connections), so a shard that hangs can occupy only its own
  threads: fan-outs to other shards, and routed queries, never wait behind it.
- **A deadline.** ``run_per_shard(..., timeout=s)`` waits at most ``s`` seconds, then
  raises ``FanOutTimeoutError`` naming the shards that did not answer. A call that is
  still running is interrupted through the hooks it registered (``on_timeout``: the
  adapters shut the socket of its database connection, which a frozen server never would
  close), and its connection is discarded; queued calls are cancelled. When the shard
  answers again, the next fan-out works without a restart.
- Every call is waited for before the first error (in shard order) is raised, so no query
  is left running behind an exception; a call made from a pool thread runs its calls one
  after another instead of waiting on the pool it occupies.

A call that fails is logged on ``uid_fields.fanout`` (WARNING, naming its shard) before
the error goes up: a fan-out's exception names one shard, the log each one that failed.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from typing import TypeVar

from .._internal import forks
from .._internal import validate as check
from ..errors import FanOutTimeoutError

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_WORKERS",
    "in_worker",
    "on_timeout",
    "on_worker_exit",
    "run_per_shard",
    "set_workers",
    "shutdown",
    "timed_out",
]

T = TypeVar("T")

log = logging.getLogger("uid_fields.fanout")

#: Threads per shard shared by every fan-out of the process (each holds its connections):
#: at most this many concurrent fan-out queries per shard per process.
DEFAULT_WORKERS = 4
#: The deadline of a fan-out when the caller names none (``FAN_OUT_TIMEOUT``).
DEFAULT_TIMEOUT_S = 30.0

_lock = threading.Lock()
_pools: dict[str, ThreadPoolExecutor] = {}
_workers = DEFAULT_WORKERS
_local = threading.local()
_at_exit: list[Callable[[], None]] = []


class _Task:
    """One call on a pool thread, and what interrupts it if its fan-out gives up."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.call = call
        self.interrupts: list[Callable[[], object]] = []
        self.timed_out = False
        self.lock = threading.Lock()

    def run(self) -> object:
        _local.worker = True
        _local.task = self
        try:
            return self.call()
        finally:
            _local.task = None
            if self.timed_out:  # its connection was cut: never serve another query
                _run_exit_hooks()

    def interrupt(self) -> None:
        with self.lock:
            self.timed_out = True
            hooks, self.interrupts = self.interrupts, []
        for hook in hooks:
            with suppress(Exception):  # best effort: the deadline has passed either way
                hook()


def set_workers(count: int) -> None:
    """Threads per shard (0 makes every fan-out sequential); takes effect for new pools."""
    global _workers
    _workers = check.integer("workers", count, 0, 256)
    shutdown()


def workers() -> int:
    return _workers


def in_worker() -> bool:
    """Whether the current thread is one of the pools'."""
    return bool(getattr(_local, "worker", False))


def on_worker_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` in a worker thread when its pool shuts down, and after a call of it
    timed out (closing the connections the worker opened, for example)."""
    _at_exit.append(hook)


def on_timeout(hook: Callable[[], object]) -> None:
    """Called from inside a call: run ``hook`` (from the waiting thread) if the fan-out's
    deadline passes while the call is still running. An adapter registers what unblocks
    its query, such as shutting down the database connection's socket."""
    task: _Task | None = getattr(_local, "task", None)
    if task is None:
        return
    with task.lock:
        if not task.timed_out:
            task.interrupts.append(hook)
            return
    hook()  # already late


def timed_out() -> bool:
    """Whether the fan-out that the current call belongs to gave up on it (its connection
    was cut): such a call must not retry."""
    task: _Task | None = getattr(_local, "task", None)
    return task is not None and task.timed_out


def _run_exit_hooks() -> None:
    for hook in _at_exit:
        with suppress(Exception):
            hook()


def _pool(name: str) -> ThreadPoolExecutor:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(
                max_workers=_workers, thread_name_prefix=f"uid_fields-fanout-{name or 'any'}"
            )
        return pool


def run_per_shard(
    calls: Sequence[Callable[[], T]],
    *,
    parallel: bool = True,
    names: Sequence[str] | None = None,
    timeout: float | None = None,
    pooled: bool = False,
) -> list[T]:
    """The results of ``calls``, in order.

    They run at the same time when ``parallel``, there is more than one, the pools have
    workers and this is not already a pool thread; call ``i`` on the pool of
    ``names[i]`` (one shared pool without names). ``timeout`` bounds the wait:
    ``FanOutTimeoutError`` names the shards whose calls had not finished. A call that
    fails is logged on ``uid_fields.fanout`` with its name. ``pooled`` runs even a
    single call on its pool's thread (one that serves every shard at once keeps its
    connections there, under the same deadline).
    """
    shown = list(names) if names is not None else [f"#{i}" for i in range(len(calls))]
    if len(shown) != len(calls):
        raise ValueError(f"{len(calls)} calls need {len(calls)} names, got {len(shown)}")
    calls = [_logged(call, name) for call, name in zip(calls, shown, strict=True)]
    if not parallel or (len(calls) < 2 and not pooled) or _workers == 0 or in_worker():
        return [call() for call in calls]
    keys = list(names) if names is not None else [""] * len(calls)  # "": one shared pool
    tasks = [_Task(call) for call in calls]
    # Each call runs in a copy of the caller's context: what the request set (its
    # read-your-writes pins, a pinned shard) holds in the workers too.
    futures: list[Future[object]] = [
        _pool(key).submit(contextvars.copy_context().run, task.run)
        for key, task in zip(keys, tasks, strict=True)
    ]
    _, pending = wait(futures, timeout=timeout)
    if pending:
        late = []
        for key, task, future in zip(keys, tasks, futures, strict=True):
            if future in pending:
                late.append(key)
                if not future.cancel():  # running: cut its connection
                    task.interrupt()
        wait(pending, timeout=1.0)  # interrupted calls return with an error at once
        raise FanOutTimeoutError(
            f"no answer within {timeout:g} s from {', '.join(sorted(set(late)))}: the "
            "fan-out gave up on them (their connections are discarded); raise "
            "FAN_OUT_TIMEOUT / fan_out_timeout= for slow queries",
            shards=sorted(set(late)),
        )
    return [future.result() for future in futures]  # type: ignore[misc]


def _logged(call: Callable[[], T], name: str) -> Callable[[], T]:
    def run() -> T:
        try:
            return call()
        except Exception as exc:
            log.warning("fan-out: the query on %s failed (%s: %s)", name, type(exc).__name__, exc)
            raise

    return run


def shutdown() -> None:
    """Stop the pools after their running calls; the next fan-out starts new ones.

    Each worker first runs the ``on_worker_exit`` hooks (its connections are its own and
    can only be closed from its thread). A worker stuck in a call is not waited for
    beyond a few seconds: its pool is abandoned (the thread closes its connections when
    the call returns)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        _shut(pool)


def _shut(pool: ThreadPoolExecutor) -> None:
    if _at_exit:
        count = getattr(pool, "_max_workers", _workers)
        barrier = threading.Barrier(count)

        def close() -> None:
            with suppress(threading.BrokenBarrierError):
                barrier.wait(2)  # holds each worker thread until every one has a task
            _run_exit_hooks()

        futures = [pool.submit(close) for _ in range(count)]
        wait(futures, timeout=5)
    pool.shutdown(wait=False, cancel_futures=True)


def _reset_after_fork() -> None:
    # The parent's threads do not exist in the child: start new pools there on demand.
    global _lock
    _pools.clear()
    _lock = threading.Lock()


forks.on_fork(_reset_after_fork)
