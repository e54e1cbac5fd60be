"""One task per shard on the event loop, gathered, with a deadline; results in order.

The asyncio counterpart of ``parallel.run_per_shard``. An async driver's connection
belongs to its event loop: it cannot be handed to a thread of the fan-out pools, so under
asyncio the shards are read by one task each, on the loop the caller runs on, and
gathered. The rules are those of the threads:

- **A deadline.** ``run_per_shard(..., timeout=s)`` waits at most ``s`` seconds, then
  raises ``FanOutTimeoutError`` naming the shards that did not answer. A task still
  running is interrupted through the hooks it registered (``on_timeout``: the adapters
  shut the socket of its database connection, so the driver's read ends with an error
  and the connection is discarded), then cancelled if it still has not returned.
- Every task is waited for before the first error (in shard order) is raised, so no
  query is left running behind an exception. A task that fails is logged on
  ``uid_fields.fanout`` (WARNING, naming its shard); a deadline that passes is one
  WARNING naming the shards that did not answer.

The hooks live in a context variable: each asyncio task runs in a copy of the caller's
context, so a hook registered by one shard's query belongs to that shard's task only.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TypeVar

from ..errors import FanOutTimeoutError

__all__ = ["GRACE_S", "on_timeout", "run_per_shard", "timed_out"]

T = TypeVar("T")

log = logging.getLogger("uid_fields.fanout")

#: Seconds an interrupted task is given to return (with its error) before it is cancelled.
GRACE_S = 1.0


class _Shard:
    """One shard's task: what interrupts it if its fan-out gives up."""

    def __init__(self) -> None:
        self.interrupts: list[Callable[[], object]] = []
        self.timed_out = False

    def interrupt(self) -> None:
        self.timed_out = True
        hooks, self.interrupts = self.interrupts, []
        for hook in hooks:
            with suppress(Exception):  # best effort: the deadline has passed either way
                hook()


_current: contextvars.ContextVar[_Shard | None] = contextvars.ContextVar(
    "uid_fields_fan_out_shard", default=None
)


def on_timeout(hook: Callable[[], object]) -> None:
    """Called from inside a shard's task: run ``hook`` if the fan-out's deadline passes
    while the task is still running (shutting its connection's socket, for example)."""
    shard = _current.get()
    if shard is None:
        return
    if shard.timed_out:
        hook()  # already late
        return
    shard.interrupts.append(hook)


def timed_out() -> bool:
    """Whether the fan-out that the current task belongs to gave up on it: such a task
    must not retry."""
    shard = _current.get()
    return shard is not None and shard.timed_out


async def run_per_shard(
    calls: Sequence[Callable[[], Awaitable[T]]],
    *,
    names: Sequence[str],
    timeout: float | None = None,
) -> list[T]:
    """The results of ``calls`` (one per shard, named by ``names``), run as tasks of the
    running event loop at the same time; ``FanOutTimeoutError`` after ``timeout`` s."""
    if len(names) != len(calls):
        raise ValueError(f"{len(calls)} calls need {len(calls)} names, got {len(names)}")
    shards = [_Shard() for _ in calls]
    tasks = [
        asyncio.ensure_future(_run(call, shard, name))
        for call, shard, name in zip(calls, shards, names, strict=True)
    ]
    if not tasks:
        return []
    try:
        _, pending = await asyncio.wait(tasks, timeout=timeout)
    except asyncio.CancelledError:  # the caller was cancelled: so is every shard's read
        for task in tasks:
            task.cancel()
        raise
    if pending:
        late = [name for name, task in zip(names, tasks, strict=True) if task in pending]
        for shard, task in zip(shards, tasks, strict=True):
            if task in pending:
                shard.interrupt()
        _, stuck = await asyncio.wait(pending, timeout=GRACE_S)
        for task in stuck:
            task.cancel()
        for task in pending - stuck:
            with suppress(BaseException):
                task.result()  # retrieved: an interrupted read's error is expected
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
    return [task.result() for task in tasks]


async def _run(call: Callable[[], Awaitable[T]], shard: _Shard, name: str) -> T:
    _current.set(shard)  # this task's own context: the hooks are this shard's
    try:
        return await call()
    except Exception as exc:
        if not shard.timed_out:
            log.warning("fan-out: the query on %s failed (%s: %s)", name, type(exc).__name__, exc)
        raise
