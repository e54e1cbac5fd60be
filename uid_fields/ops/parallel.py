"""One call per shard at the same time, with a deadline; results in order.

A fan-out over eight databases that runs one query after another waits for eight round
trips; run together, it waits for about one. The adapters decide *whether* a fan-out may
run in parallel (never inside a transaction, never on connections that cannot be shared);
this module only runs the calls:

- **Bounded work per shard.** Each shard has a small pool of its own: at most
  ``concurrency`` calls run on one shard at once in the process (``workers()`` by
  default), each on a thread holding its own connections; a call over the bound waits
  for a thread of its shard. So a process holds at most that many fan-out connections
  per shard, and a shard that hangs occupies only its own threads: fan-outs to other
  shards, and routed queries, never wait behind it.
- **Connections that end.** A thread idle for ``idle_timeout()`` seconds exits, running
  the ``on_worker_exit`` hooks on its way out (the adapters close its connections
  there: only their own thread can). ``tidy()`` asks each thread that ran a call since
  its last tidy (or whose connections come due) to run the ``on_worker_tidy`` hooks, on
  its own thread: Django's adapter calls it when a request starts and ends, and closes
  connections past ``CONN_MAX_AGE`` there, as Django does for a request's thread.
- **A deadline.** ``run_per_shard(..., timeout=s)`` waits at most ``s`` seconds, also
  while calls wait for a thread, then raises ``FanOutTimeoutError`` naming the shards
  that did not answer. A call that is still running is interrupted through the hooks it
  registered (``on_timeout``: the adapters shut the socket of its database connection,
  which a frozen server never would close), and its connection is discarded; waiting
  calls are cancelled and never run. When the shard answers again, the next fan-out
  works without a restart.
- **Calls that stay on the calling thread.** ``here=`` names calls that must run on this
  thread (a read inside a transaction runs on the transaction's own connection, which
  only this thread may use): they run here, one after another, *while* the pool runs
  the rest, so the fan-out waits for the longer of the two, not their sum. The deadline
  bounds them too: a call still running when it passes is interrupted through its
  ``on_timeout`` hooks from a timer thread.
- Every call is waited for before the first error (in shard order) is raised, so no query
  is left running behind an exception; a call made from a pool thread runs its calls one
  after another instead of waiting on the pool it occupies.

A call that fails is logged on ``uid_fields.fanout`` (WARNING, naming its shard) before
the error goes up: a fan-out's exception names one shard, the log each one that failed.
A deadline that passes is one WARNING naming every shard that did not answer (the calls
it cut are not logged as failures too): a hung shard raises nothing of its own.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import Future, wait
from contextlib import suppress
from typing import TypeVar

from .._internal import forks
from .._internal import validate as check
from ..errors import FanOutTimeoutError

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_WORKERS",
    "MAX_WORKERS",
    "check_concurrency",
    "idle_timeout",
    "in_worker",
    "may_run_at_once",
    "on_timeout",
    "on_worker_exit",
    "on_worker_tidy",
    "once_more_after_drop",
    "run_per_shard",
    "set_idle_timeout",
    "set_workers",
    "shutdown",
    "tidy",
    "timed_out",
    "workers",
]

T = TypeVar("T")

log = logging.getLogger("uid_fields.fanout")

#: Calls that run on one shard at once per process when the caller names no bound
#: (``FAN_OUT_CONCURRENCY``): each on a thread of its own, holding its own connections.
DEFAULT_WORKERS = 4
#: The highest bound ``concurrency`` / ``set_workers`` accept.
MAX_WORKERS = 256
#: The deadline of a fan-out when the caller names none (``FAN_OUT_TIMEOUT``).
DEFAULT_TIMEOUT_S = 30.0
#: Seconds a pool thread waits for work before it exits and its connections close.
DEFAULT_IDLE_TIMEOUT_S = 60.0

_lock = threading.Lock()
_pools: dict[str, _Pool] = {}
_workers = DEFAULT_WORKERS
_idle_timeout = DEFAULT_IDLE_TIMEOUT_S
_local = threading.local()
_at_exit: list[Callable[[], None]] = []
_at_tidy: list[Callable[[], float | None]] = []


class _Task:
    """One call on a pool thread, and what interrupts it if its fan-out gives up."""

    def __init__(self, call: Callable[[], object], *, pooled: bool = True) -> None:
        self.call = call
        self.pooled = pooled  # False: runs on the calling thread (``here=``)
        self.interrupts: list[Callable[[], object]] = []
        self.timed_out = False
        self.lock = threading.Lock()
        self.future: Future[object] = Future()
        self.context = contextvars.copy_context()

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return  # cancelled while it waited for a thread: its fan-out gave up
        outer = getattr(_local, "task", None)
        _local.task = self
        try:
            # A call kept on the calling thread runs in the caller's own context, as a
            # sequential fan-out's calls do.
            result = self.context.run(self.call) if self.pooled else self.call()
        except BaseException as exc:
            self.future.set_exception(exc)
        else:
            self.future.set_result(result)
        finally:
            _local.task = outer
            if self.timed_out and self.pooled:  # its connection was cut: never reuse it
                _run_exit_hooks()

    def interrupt(self) -> None:
        with self.lock:
            self.timed_out = True
            hooks, self.interrupts = self.interrupts, []
        for hook in hooks:
            with suppress(Exception):  # best effort: the deadline has passed either way
                hook()


class _Pool:
    """The threads of one shard: at most ``limit`` calls at once, the rest wait in order.

    Threads start on demand and exit after ``idle_timeout()`` seconds without work (or
    when the limit is lowered below their number), each running the exit hooks on its
    own thread. ``tidy()`` wakes the threads that ran a call since their last tidy, or
    whose connections came due, to run the tidy hooks.
    """

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.cond = threading.Condition(threading.Lock())
        self.queue: deque[_Task] = deque()
        self.threads = 0
        self.running = 0
        self.waiting = 0
        self.epoch = 0  # bumped by tidy(): each thread tidies once per epoch it sees
        self.used = 0  # threads that ran a call since their last tidy
        self.due: dict[int, float] = {}  # thread id -> when its connections come due
        self.closed = False
        self.alive: list[threading.Thread] = []

    def submit(self, task: _Task) -> None:
        with self.cond:
            self.queue.append(task)
            if self.waiting >= len(self.queue):
                self.cond.notify()
            elif self.threads < self.limit:
                self._start()

    def _start(self) -> None:
        self.threads += 1
        thread = threading.Thread(
            target=self._work,
            name=f"uid_fields-fanout-{self.name or 'any'}-{self.threads}",
            daemon=True,
        )
        self.alive = [t for t in self.alive if t.is_alive()]
        self.alive.append(thread)
        thread.start()

    def cancel(self, task: _Task) -> bool:
        """Take a waiting call off the queue; False when it already started."""
        with self.cond:
            if task.future.cancel():
                with suppress(ValueError):
                    self.queue.remove(task)
                return True
        return False

    def needs_tidy(self, now: float) -> bool:
        with self.cond:
            if self.used or any(at <= now for at in self.due.values()):
                self.epoch += 1
                self.cond.notify_all()
                return True
        return False

    def _work(self) -> None:
        _local.worker = True
        me = threading.get_ident()
        used = False
        seen = self.epoch
        cond = self.cond
        cond.acquire()
        try:
            while True:
                if seen != self.epoch:
                    seen = self.epoch
                    due = self.due.get(me)
                    if used or (due is not None and due <= time.monotonic()):
                        if used:
                            self.used -= 1
                        used = False
                        cond.release()
                        try:
                            due = _run_tidy_hooks()
                        finally:
                            cond.acquire()
                        if due is None:
                            self.due.pop(me, None)
                        else:
                            self.due[me] = due
                    continue
                if self.queue and self.running < self.limit:
                    task = self.queue.popleft()
                    if not used:
                        used = True
                        self.used += 1
                    self.running += 1
                    cond.release()
                    try:
                        task.run()
                    finally:
                        cond.acquire()
                        self.running -= 1
                    continue
                if self.closed or self.threads > self.limit:
                    break
                self.waiting += 1
                woken = cond.wait(_idle_timeout)
                self.waiting -= 1
                if not woken and not self.queue and seen == self.epoch:
                    break  # idle too long: the thread goes, and its connections with it
            self.threads -= 1
            if used:
                self.used -= 1
            self.due.pop(me, None)
        finally:
            cond.release()
        _run_exit_hooks()

    def close(self) -> list[threading.Thread]:
        with self.cond:
            self.closed = True
            for task in list(self.queue):
                task.future.cancel()
            self.queue.clear()
            self.cond.notify_all()
            return list(self.alive)


def set_workers(count: int) -> None:
    """Calls per shard at once when the caller names no ``concurrency`` (0 makes those
    fan-outs sequential); the pools start again."""
    global _workers
    _workers = check.integer("workers", count, 0, MAX_WORKERS)
    shutdown()


def workers() -> int:
    return _workers


def check_concurrency(name: str, value: object) -> int:
    """A bound of calls per shard at once: an int in 0..MAX_WORKERS (0: sequential)."""
    return check.integer(name, value, 0, MAX_WORKERS)


def set_idle_timeout(seconds: float) -> None:
    """Seconds a pool thread waits for work before it exits (closing its connections)."""
    global _idle_timeout
    _idle_timeout = check.positive_seconds("idle_timeout", seconds)
    with _lock:
        pools = list(_pools.values())
    for pool in pools:
        with pool.cond:
            pool.cond.notify_all()  # waiting threads start the new wait


def idle_timeout() -> float:
    return _idle_timeout


def in_worker() -> bool:
    """Whether the current thread is one of the pools'."""
    return bool(getattr(_local, "worker", False))


def on_worker_exit(hook: Callable[[], None]) -> None:
    """Run ``hook`` in a worker thread when it exits (idle, or its pool shuts down), and
    after a call of it timed out (closing the connections the worker opened, for
    example)."""
    _at_exit.append(hook)


def on_worker_tidy(hook: Callable[[], float | None]) -> None:
    """Run ``hook`` in each worker thread that ran a call when ``tidy()`` is asked for
    (closing connections past their age, for example). The hook returns the
    ``time.monotonic()`` moment when what the thread still holds comes due (a
    connection's age), so a later ``tidy()`` wakes the thread then although it ran
    nothing since; None when nothing does."""
    _at_tidy.append(hook)


def tidy() -> None:
    """Ask every pool thread that ran a call since its last tidy (or whose connections
    came due) to run the ``on_worker_tidy`` hooks, on its own thread: at once when it is
    idle, after its call when busy. Cheap when no such thread exists."""
    if not _at_tidy:
        return
    with _lock:
        pools = list(_pools.values())
    now = time.monotonic()
    for pool in pools:
        pool.needs_tidy(now)


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


def may_run_at_once(vendors: Iterable[str], *, holds_shard_work: bool) -> bool:
    """Whether a fan-out may read every shard at once, each on a connection of its own
    (a pool thread's): the rule both adapters follow. Not when a shard is SQLite (its
    connections belong to the caller's thread, and a file gains nothing from threads),
    and not when the caller holds work that the pool's connections cannot see (a
    session's changes waiting for their flush; a transaction's writes on a database the
    query reads while it compiles): then the shards are read one after another through
    the caller. A transaction's connection is no such reason: the
    adapters read it where it is (``run_per_shard(here=...)``) or lend it to a pool
    thread, at the same time as the other shards. ``vendors`` are the shards'
    backend names (Django's ``connection.vendor``, SQLAlchemy's ``dialect.name``)."""
    return not holds_shard_work and all(vendor != "sqlite" for vendor in vendors)


def once_more_after_drop(
    read: Callable[[], T],
    dropped: Callable[[Exception], bool],
    *,
    cut: Callable[[], bool] | None = None,
) -> T:
    """``read()`` of one shard, and once more when it failed because its connection was
    dropped (``dropped(error)``: a pooled connection the server closed while it sat idle,
    a restart; it may also discard that connection). Never after the fan-out's deadline
    cut the connection (``cut``, this module's ``timed_out`` unless given: the asyncio
    pool's), never for an error of the query itself: the rule both adapters follow, for
    reads only, so the retry repeats nothing."""
    try:
        return read()
    except Exception as error:
        if not dropped(error) or (cut or timed_out)():
            raise
        return read()


def timed_out() -> bool:
    """Whether the fan-out that the current call belongs to gave up on it (its connection
    was cut): such a call must not retry."""
    task: _Task | None = getattr(_local, "task", None)
    return task is not None and task.timed_out


def _run_exit_hooks() -> None:
    for hook in _at_exit:
        with suppress(Exception):
            hook()


def _run_tidy_hooks() -> float | None:
    due: float | None = None
    for hook in _at_tidy:
        try:
            at = hook()
        except Exception:  # a tidy that fails must not take the thread down
            log.warning("fan-out: tidying a pool thread failed", exc_info=True)
            continue
        if at is not None:
            due = at if due is None else min(due, at)
    return due


def _pool(name: str, limit: int) -> _Pool:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = _Pool(name, limit)
        elif pool.limit != limit:
            with pool.cond:
                pool.limit = limit
                pool.cond.notify_all()  # threads over a lowered limit exit
        return pool


def run_per_shard(
    calls: Sequence[Callable[[], T]],
    *,
    parallel: bool = True,
    names: Sequence[str] | None = None,
    timeout: float | None = None,
    concurrency: int | None = None,
    pooled: bool = False,
    here: Collection[int] = (),
) -> list[T]:
    """The results of ``calls``, in order.

    They run at the same time when ``parallel``, there is more than one, the bound is
    above 0 and this is not already a pool thread; call ``i`` on the pool of
    ``names[i]`` (one shared pool without names), where at most ``concurrency`` calls
    (``workers()`` when None) run at once, the process over, and the rest wait their
    turn. ``timeout`` bounds the whole wait, the turn included:
    ``FanOutTimeoutError`` names the shards whose calls had not finished. A call that
    fails is logged on ``uid_fields.fanout`` with its name. ``pooled`` runs even a
    single call on its pool's thread (one that serves every shard at once keeps its
    connections there, under the same deadline).

    ``here`` holds the positions of calls that must run on the calling thread (on the
    connection of a transaction it has open): they run there in order while the pool
    runs the others, under the same deadline; when every call is one of them, they
    simply run one after another.
    """
    shown = list(names) if names is not None else [f"#{i}" for i in range(len(calls))]
    if len(shown) != len(calls):
        raise ValueError(f"{len(calls)} calls need {len(calls)} names, got {len(shown)}")
    limit = _workers if concurrency is None else check_concurrency("concurrency", concurrency)
    calls = [_logged(call, name) for call, name in zip(calls, shown, strict=True)]
    local = set(here)
    sequential = not parallel or (len(calls) < 2 and not pooled) or limit == 0
    if sequential or in_worker() or len(local) >= len(calls):
        return [call() for call in calls]
    keys = list(names) if names is not None else [""] * len(calls)  # "": one shared pool
    # Each call runs in a copy of the caller's context: what the request set (its
    # read-your-writes pins, a pinned shard) holds in the workers too.
    tasks = [_Task(call, pooled=i not in local) for i, call in enumerate(calls)]
    pools = [None if i in local else _pool(key, limit) for i, key in enumerate(keys)]
    for pool, task in zip(pools, tasks, strict=True):
        if pool is not None:
            pool.submit(task)
    started = time.monotonic()
    for task in tasks:
        if not task.pooled:
            _run_here(task, None if timeout is None else started + timeout)
    futures = [task.future for task in tasks]
    left = None if timeout is None else max(0.0, started + timeout - time.monotonic())
    _, pending = wait(futures, timeout=left)
    late_here = [key for key, task in zip(keys, tasks, strict=True) if _cut_here(task)]
    if pending or late_here:
        late = list(late_here)
        for key, pool, task in zip(keys, pools, tasks, strict=True):
            if task.future in pending and pool is not None:
                late.append(key)
                if not pool.cancel(task):  # running: cut its connection
                    task.interrupt()
        wait(pending, timeout=1.0)  # interrupted calls return with an error at once
        error = FanOutTimeoutError(
            f"no answer within {timeout:g} s from {', '.join(sorted(set(late)))}: the "
            "fan-out gave up on them (their connections are discarded); raise "
            "FAN_OUT_TIMEOUT / fan_out_timeout= for slow queries",
            shards=sorted(set(late)),
        )
        # A hung shard raises nothing of its own: without this line the log, which
        # names every shard that failed, would not name the one that hangs.
        log.warning("fan-out: %s", error)
        raise error
    return [future.result() for future in futures]  # type: ignore[misc]


def _cut_here(task: _Task) -> bool:
    """Whether a call of the calling thread was cut by the deadline (not one that
    finished just as its timer fired)."""
    if task.pooled or not task.timed_out:
        return False
    return task.future.cancelled() or task.future.exception() is not None


def _run_here(task: _Task, deadline: float | None) -> None:
    """Run ``task`` on the calling thread; if ``deadline`` (``time.monotonic()``) passes
    first, a timer thread interrupts it as a late pool call is interrupted."""
    if deadline is None:
        task.run()
        return
    left = deadline - time.monotonic()
    if left <= 0:
        task.future.cancel()  # the deadline passed before its turn: it never runs
        task.timed_out = True
        return
    timer = threading.Timer(left, task.interrupt)
    timer.daemon = True
    timer.start()
    try:
        task.run()
    finally:
        timer.cancel()


def _logged(call: Callable[[], T], name: str) -> Callable[[], T]:
    def run() -> T:
        try:
            return call()
        except Exception as exc:
            if not timed_out():  # cut by its fan-out's deadline: that names it already
                log.warning(
                    "fan-out: the query on %s failed (%s: %s)", name, type(exc).__name__, exc
                )
            raise

    return run


def shutdown() -> None:
    """Stop the pools after their running calls; the next fan-out starts new ones.

    Each worker runs the ``on_worker_exit`` hooks as it exits (its connections are its
    own and can only be closed from its thread); waiting calls are cancelled. A worker
    stuck in a call is not waited for beyond a few seconds: it exits, closing its
    connections, when the call returns."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    threads = [thread for pool in pools for thread in pool.close()]
    deadline = time.monotonic() + 5
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


def _reset_after_fork() -> None:
    # The parent's threads do not exist in the child: start new pools there on demand.
    global _lock
    _pools.clear()
    _lock = threading.Lock()


forks.on_fork(_reset_after_fork)
