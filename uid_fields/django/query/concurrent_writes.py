"""One bulk write's per-shard statements at the same time, on the caller's connections.

A ``bulk_create`` whose rows span four shards runs four INSERTs; one after another, the
call waits for four round trips and four servers' work in turn. Run together, it waits
for about the slowest one. The transactions stay the caller's: ``bulk_create`` opens
one per shard on the calling thread's connections (``sharded_atomic``), each INSERT runs
on a pool thread of its shard that borrows that shard's connection for the statement
(``compat.borrowed_connection``; no connection is used by two threads at once), and
the commits, or the rollback of every shard when one failed, run on the calling thread
as before. So what a failure leaves is unchanged: every call is waited for, the first
error in shard order goes up, and no shard's rows are committed.

It runs concurrently only where that is safe and pays: more than one shard, no SQLite
(one file, one writer), and no transaction already open on any of the shards in this
thread: a ``bulk_create`` inside ``atomic()`` stays on the calling thread, one shard
after another, exactly as Django would run it. A call made from a pool thread runs its
statements in turn (``parallel.run_per_shard``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from django.db import connections

from ...ops import parallel
from ..compat import borrowed_connection
from ..conf import conf
from ..connections.replicas import read_pins

__all__ = ["concurrent_inserts", "run_on_caller_connections"]


def concurrent_inserts(aliases: Iterable[str]) -> bool:
    """Whether one write's statements on ``aliases`` may run at the same time."""
    names = list(aliases)
    if len(names) < 2 or parallel.in_worker():
        return False
    return all(
        connections[alias].vendor != "sqlite" and not connections[alias].in_atomic_block
        for alias in names
    )


def run_on_caller_connections(calls: Mapping[str, Callable[[], None]]) -> None:
    """Run ``calls[alias]()`` for every alias at once, each on a pool thread of its
    shard using this thread's connection to that shard (and its open transaction).
    Waits for all; raises the first error in the given order."""
    read_pins()  # made here, so the workers pin this request's writes
    aliases = list(calls)
    for alias in aliases:
        connections[alias].ensure_connection()
    wrappers = {alias: connections[alias] for alias in aliases}
    for wrapper in wrappers.values():
        wrapper.inc_thread_sharing()
    try:
        parallel.run_per_shard(
            [_borrowing(alias, wrappers[alias], calls[alias]) for alias in aliases],
            names=aliases,
            timeout=None,  # a write has no deadline of its own, as when run in turn
            concurrency=conf.FAN_OUT_CONCURRENCY,
        )
    finally:
        for wrapper in wrappers.values():
            wrapper.dec_thread_sharing()


def _borrowing(alias: str, wrapper: object, call: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        if connections[alias] is wrapper:  # run in turn on the calling thread
            call()
            return
        with borrowed_connection(alias, wrapper):  # type: ignore[arg-type]
            call()

    return run
