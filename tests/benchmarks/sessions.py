"""What building a session costs: ``sharded_session()`` over 8 engines against a plain
``Session()`` and SQLAlchemy's own ``ShardedSession`` over the same engines.

A web application builds one per request (``with sharded_session(engines) as s:``), so
its constructor is paid on every request. Building a session opens no connection, so
the engines are SQLite files that are never touched. Candidates alternate within each
round (``harness.alternate``); each round builds and closes ``calls`` sessions of each
and times them as a batch, in wall-clock time (``perf_counter``) and in this process's
CPU time (``process_time``, which other processes on the machine do not inflate); the
median round is reported. The ratios are of figures measured in the same run.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import Section, alternate, median

__all__ = ["CANDIDATES", "run"]

SHARDS = 8

#: (key, label) of each candidate, in the table's order.
CANDIDATES = (
    ("sharded_session", f"sharded_session(engines), {SHARDS} shards"),
    ("ShardedSession", f"SQLAlchemy's ShardedSession(shards=engines, ...), {SHARDS} shards"),
    ("Session", "Session(engine)"),
)


def _timed(make: Callable[[], Any], calls: int) -> Callable[[], tuple[float, ...]]:
    """Seconds per session: (wall, CPU) to build one, then (wall, CPU) to build and close
    it (a request's whole use of an unused session: SQLAlchemy makes a session's event
    dispatcher when it is first used or closed). Each session is closed before the next
    is built, as requests do; the clocks' own cost (an empty build) is taken off."""

    def once(build: Callable[[], Any]) -> tuple[float, ...]:
        wall, cpu = time.perf_counter, time.process_time
        built_wall = built_cpu = total_wall = total_cpu = 0.0
        for _ in range(calls):
            w0, c0 = wall(), cpu()
            session = build()
            w1, c1 = wall(), cpu()
            if session is not None:
                session.close()
            w2, c2 = wall(), cpu()
            built_wall += w1 - w0
            built_cpu += c1 - c0
            total_wall += w2 - w0
            total_cpu += c2 - c0
        return tuple(s / calls for s in (built_wall, built_cpu, total_wall, total_cpu))

    def measure() -> tuple[float, ...]:
        clocks = once(lambda: None)
        return tuple(max(m - c, 0.0) for m, c in zip(once(make), clocks, strict=True))

    return measure


def run(calls: int = 2000, rounds: int = 7) -> tuple[list[Section], dict[str, Any]]:
    import sqlalchemy as sa
    from sqlalchemy.ext.horizontal_shard import ShardedSession
    from sqlalchemy.orm import Session

    from uid_fields.sqlalchemy import sharded_session

    with tempfile.TemporaryDirectory() as folder:
        engines = {
            f"shard_{i}": sa.create_engine(f"sqlite:///{Path(folder) / f's{i}.db'}")
            for i in range(SHARDS)
        }
        peer: dict[str, Any] = {
            "shards": engines,
            "shard_chooser": lambda *args, **kwargs: "shard_0",
            "identity_chooser": lambda *args, **kwargs: ["shard_0"],
            "execute_chooser": lambda *args, **kwargs: ["shard_0"],
        }
        makers: dict[str, Callable[[], Any]] = {
            "sharded_session": lambda: sharded_session(engines),
            "ShardedSession": lambda: ShardedSession(**peer),
            "Session": lambda: Session(engines["shard_0"]),
        }
        for make in makers.values():  # the first session over the engines sets them up
            make().close()
        samples = alternate([(key, _timed(makers[key], calls)) for key, _ in CANDIDATES], rounds)
        for engine in engines.values():
            engine.dispose()
    figures = ("build wall", "build CPU", "wall", "CPU")
    found = {
        figure: {key: median([s[i] for s in samples[key]]) for key, _ in CANDIDATES}
        for i, figure in enumerate(figures)
    }
    section = Section(
        "session",
        f"Building a session ({calls} per round, median of {rounds} rounds)",
        [
            "session",
            "build CPU us",
            "vs Session()",
            "build + close CPU us",
            "vs Session()",
            "build + close wall us",
        ],
        [
            [
                label,
                f"{found['build CPU'][key] * 1e6:.1f}",
                f"{found['build CPU'][key] / found['build CPU']['Session']:.2f}x",
                f"{found['CPU'][key] * 1e6:.1f}",
                f"{found['CPU'][key] / found['CPU']['Session']:.2f}x",
                f"{found['wall'][key] * 1e6:.1f}",
            ]
            for key, label in CANDIDATES
        ],
        [
            "Each session is built (build), then closed before the next one is built; "
            "the engines are never connected to. Closing makes the session's event "
            "dispatcher, which a used session makes anyway; Session() pays it too."
        ],
    )
    return [section], {"session": found}
