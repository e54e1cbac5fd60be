"""The bounded pool that runs one call per shard at the same time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from uid_fields.errors import FanOutTimeoutError
from uid_fields.ops import parallel


@pytest.fixture(autouse=True)
def fresh_pool() -> Iterator[None]:
    parallel.shutdown()
    yield
    parallel.set_workers(parallel.DEFAULT_WORKERS)


def test_calls_run_at_the_same_time_and_results_keep_their_order() -> None:
    meet = threading.Barrier(4, timeout=5)  # only passes if all four run at once

    def call(i: int) -> int:
        meet.wait()
        time.sleep(0.01 * (4 - i))  # finish in reverse order
        return i

    assert parallel.run_per_shard([lambda i=i: call(i) for i in range(4)]) == [0, 1, 2, 3]


def test_sequential_when_asked_or_when_the_pool_has_no_workers() -> None:
    seen: list[str] = []

    def call() -> None:
        seen.append(threading.current_thread().name)

    parallel.run_per_shard([call, call], parallel=False)
    parallel.set_workers(0)
    parallel.run_per_shard([call, call])
    assert seen == [threading.current_thread().name] * 4


def test_the_first_error_in_order_is_raised_after_every_call_finished() -> None:
    finished: list[int] = []

    def ok(i: int) -> int:
        time.sleep(0.05)
        finished.append(i)
        return i

    def fail(message: str) -> int:
        raise RuntimeError(message)

    calls = [lambda: ok(0), lambda: fail("second"), lambda: fail("third"), lambda: ok(3)]
    with pytest.raises(RuntimeError, match="second"):
        parallel.run_per_shard(calls)
    assert sorted(finished) == [0, 3]  # nothing left running behind the exception


def test_the_pool_is_bounded_and_nested_fan_outs_do_not_wait_on_it() -> None:
    parallel.set_workers(2)
    running, peak = 0, 0
    lock = threading.Lock()

    def call() -> list[int]:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        inner = parallel.run_per_shard([lambda: 1, lambda: 2])  # runs in this worker
        time.sleep(0.02)
        with lock:
            running -= 1
        return inner

    assert parallel.run_per_shard([call] * 6) == [[1, 2]] * 6
    assert peak == 2


def test_shutdown_runs_the_exit_hooks_in_every_worker_thread() -> None:
    closed: set[str] = set()
    hook = lambda: closed.add(threading.current_thread().name)  # noqa: E731
    parallel.on_worker_exit(hook)
    try:
        parallel.set_workers(3)
        parallel.run_per_shard([lambda: None] * 3)
        parallel.shutdown()
    finally:
        parallel._at_exit.remove(hook)
    assert len(closed) == 3 and all(n.startswith("uid_fields-fanout") for n in closed)


def test_a_call_past_the_deadline_is_interrupted_and_named() -> None:
    released = threading.Event()

    def stuck() -> str:
        parallel.on_timeout(released.set)  # what a driver's socket shutdown does
        released.wait(30)
        raise ConnectionError("socket shut down")

    started = time.monotonic()
    with pytest.raises(FanOutTimeoutError, match="shard_2") as raised:
        parallel.run_per_shard(
            [lambda: "a", stuck, lambda: "c"], names=["shard_1", "shard_2", "shard_3"], timeout=0.3
        )
    assert raised.value.shards == ["shard_2"]
    assert released.is_set() and time.monotonic() - started < 5


def test_a_hung_shard_does_not_starve_fan_outs_to_the_others() -> None:
    parallel.set_workers(2)
    hang = threading.Event()

    def hung() -> None:
        hang.wait(30)

    try:
        for _ in range(3):  # more stuck calls than the hung shard has threads
            with pytest.raises(FanOutTimeoutError):
                parallel.run_per_shard([hung, lambda: 1], names=["frozen", "ok"], timeout=0.2)
        started = time.monotonic()
        assert parallel.run_per_shard([lambda: 1, lambda: 2], names=["ok", "also_ok"]) == [1, 2]
        assert time.monotonic() - started < 2  # not queued behind the frozen shard
    finally:
        hang.set()
    assert parallel.run_per_shard([lambda: 3, lambda: 4], names=["frozen", "ok"]) == [3, 4]
