"""fork(): a child never silently reuses its parent's generator state."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from uid_fields import (
    TWITTER,
    ForkedGeneratorError,
    LocalityUUIDGenerator,
    ShardedIdGenerator,
    SnowflakeGenerator,
    UniqIdGenerator,
)
from uid_fields.ids.layouts import INSTAGRAM

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def run_in_children(count: int, work: Callable[[], object]) -> list[object]:
    """Fork ``count`` children; each runs ``work`` and sends back its result or error."""
    pids_and_pipes = []
    for _ in range(count):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(read)
            try:
                payload = {"ok": work()}
            except BaseException as exc:  # report every failure to the parent
                payload = {"error": type(exc).__name__, "message": str(exc)}
            with os.fdopen(write, "w") as pipe:
                json.dump(payload, pipe, default=str)
            os._exit(0)
        os.close(write)
        pids_and_pipes.append((pid, read))
    results = []
    for pid, read in pids_and_pipes:
        with os.fdopen(read) as pipe:
            results.append(json.load(pipe))
        os.waitpid(pid, 0)
    return results


class FileCounter:
    """A per-process node source for the test: each acquire takes the next number."""

    per_process = True

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("0")

    def acquire(self, field: str, maximum: int) -> int:
        with self.path.open("r+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            value = int(handle.read())
            handle.seek(0)
            handle.write(str(value + 1))
            handle.truncate()
        return value


def test_static_worker_is_refused_in_children_with_a_clear_error() -> None:
    gen = SnowflakeGenerator(TWITTER, worker=3)
    parent_ids = gen.next_ids(1000)
    results = run_in_children(3, lambda: gen.next_ids(1000))
    assert all(r.get("error") == "ForkedGeneratorError" for r in results), results
    assert "per-process node id" in results[0]["message"]
    later = gen.next_ids(10)  # the parent goes on, after its earlier ids
    assert min(later) > max(parent_ids)


def test_per_process_source_gives_each_child_its_own_worker(tmp_path: Path) -> None:
    gen = SnowflakeGenerator(TWITTER, worker=FileCounter(tmp_path / "counter"))
    parent_ids = gen.next_ids(5000)
    results = run_in_children(3, lambda: gen.next_ids(5000))
    child_ids = [i for r in results for i in r["ok"]]
    workers = {TWITTER.decompose(i).worker for i in child_ids}
    assert workers == {1, 2, 3}
    everything = parent_ids + child_ids + gen.next_ids(5000)
    assert len(set(everything)) == len(everything) == 25_000


def test_sharded_generator_without_node_fields_is_refused_in_children() -> None:
    gen = ShardedIdGenerator(INSTAGRAM)
    gen.next_id(shard=1)
    results = run_in_children(2, lambda: gen.next_id(shard=1))
    assert [r.get("error") for r in results] == ["ForkedGeneratorError"] * 2


def test_on_fork_continue_is_an_explicit_opt_in() -> None:
    gen = SnowflakeGenerator(TWITTER, worker=4, on_fork="continue")
    results = run_in_children(1, lambda: gen.next_ids(3))
    assert len(results[0]["ok"]) == 3


def test_locality_children_get_their_own_pid_and_counter() -> None:
    gen = LocalityUUIDGenerator()
    parent = [str(u) for u in gen.next_ids(2000)]
    results = run_in_children(3, lambda: [str(u) for u in gen.next_ids(2000)])
    children = [u for r in results for u in r["ok"]]
    pids = {int(u[9:13], 16) for u in children}
    assert len(pids) == 3 and int(parent[0][9:13], 16) not in pids
    assert len(set(parent + children)) == 8000


def test_locality_with_fixed_pid_refuses_in_children() -> None:
    gen = LocalityUUIDGenerator(pid=7)
    results = run_in_children(1, lambda: str(gen.next_id()))
    assert results[0]["error"] == "ForkedGeneratorError"


def test_uniqid_children_are_unique() -> None:
    gen = UniqIdGenerator(4)
    parent = gen.next_ids(2000)
    results = run_in_children(3, lambda: gen.next_ids(2000))
    everything = parent + [u for r in results for u in r["ok"]]
    assert len(set(everything)) == 8000


def test_error_type_is_public() -> None:
    assert issubclass(ForkedGeneratorError, RuntimeError)


def test_sharded_generator_refuses_new_shards_in_children_too() -> None:
    gen = ShardedIdGenerator(INSTAGRAM)
    gen.next_id(shard=1)  # shard 2 is never used by the parent
    results = run_in_children(2, lambda: gen.next_id(shard=2))
    assert [r.get("error") for r in results] == ["ForkedGeneratorError"] * 2
    assert gen.next_id(shard=2) > 0  # the parent goes on
