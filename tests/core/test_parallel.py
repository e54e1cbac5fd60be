"""The bounded pool that runs one call per shard at the same time."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from uid_fields.errors import FanOutTimeoutError
from uid_fields.ops import async_parallel, parallel


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
    meet = threading.Barrier(3, timeout=5)  # three calls at once: three threads
    ran: set[str] = set()

    def call() -> None:
        ran.add(threading.current_thread().name)
        meet.wait()

    try:
        parallel.set_workers(3)
        parallel.run_per_shard([call] * 3)
        parallel.shutdown()
    finally:
        parallel._at_exit.remove(hook)
    assert closed == ran and len(closed) == 3
    assert all(n.startswith("uid_fields-fanout") for n in closed)


def test_a_call_past_the_deadline_is_interrupted_and_named() -> None:
    released = threading.Event()

    def stuck() -> str:
        parallel.on_timeout(released.set)  # what a driver's socket shutdown does
        released.wait(30)
        raise ConnectionError("socket shut down")

    with pytest.raises(FanOutTimeoutError, match="shard_2") as raised:
        parallel.run_per_shard(
            [lambda: "a", stuck, lambda: "c"], names=["shard_1", "shard_2", "shard_3"], timeout=0.3
        )
    assert raised.value.shards == ["shard_2"]
    assert released.is_set()  # interrupted by the deadline, not left to its own 30 s


def test_a_fan_out_timeout_is_one_warning_naming_the_late_shards(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A hung shard is what an operator must hear about: one WARNING on uid_fields.fanout
    names each shard that did not answer, and the interrupted call's own error (a socket
    the fan-out shut) is not logged as a failure of its own."""
    caplog.set_level(logging.DEBUG, logger="uid_fields")
    released = threading.Event()
    hung = threading.Event()

    def cut() -> str:
        parallel.on_timeout(released.set)  # what a driver's socket shutdown does
        released.wait(30)
        raise ConnectionError("socket shut down")

    def frozen() -> str:  # registers no interrupt: still running after the deadline
        hung.wait(30)
        return "late"

    try:
        with pytest.raises(FanOutTimeoutError):
            parallel.run_per_shard(
                [lambda: "a", cut, frozen], names=["shard_1", "shard_2", "shard_3"], timeout=0.3
            )
    finally:
        hung.set()
    records = [r for r in caplog.records if r.name == "uid_fields.fanout"]
    assert [r.levelname for r in records] == ["WARNING"]
    message = records[0].getMessage()
    assert "shard_2" in message and "shard_3" in message and "shard_1" not in message
    assert "0.3 s" in message


def test_an_async_fan_out_timeout_is_one_warning_naming_the_late_shard(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="uid_fields")

    async def fast() -> str:
        return "a"

    async def stuck() -> str:
        await asyncio.sleep(30)
        return "late"

    async def main() -> None:
        with pytest.raises(FanOutTimeoutError):
            await async_parallel.run_per_shard(
                [fast, stuck], names=["shard_1", "shard_2"], timeout=0.2
            )

    asyncio.run(main())
    records = [r for r in caplog.records if r.name == "uid_fields.fanout"]
    assert [r.levelname for r in records] == ["WARNING"]
    assert "shard_2" in records[0].getMessage() and "shard_1" not in records[0].getMessage()


def test_a_hung_shard_does_not_starve_fan_outs_to_the_others() -> None:
    parallel.set_workers(2)
    hang = threading.Event()
    returned: list[None] = []

    def hung() -> None:
        hang.wait(30)
        returned.append(None)

    try:
        for _ in range(3):  # more stuck calls than the hung shard has threads
            with pytest.raises(FanOutTimeoutError):
                parallel.run_per_shard([hung, lambda: 1], names=["frozen", "ok"], timeout=0.2)
        assert parallel.run_per_shard([lambda: 1, lambda: 2], names=["ok", "also_ok"]) == [1, 2]
        assert returned == []  # done while every hung call still hangs: not queued behind
    finally:
        hang.set()
    assert parallel.run_per_shard([lambda: 3, lambda: 4], names=["frozen", "ok"]) == [3, 4]


def _peak_per_name(limit: int, fan_outs: int) -> tuple[int, list[list[int]]]:
    running: dict[str, int] = {}
    peak = 0
    lock = threading.Lock()

    def call(name: str, i: int) -> int:
        nonlocal peak
        with lock:
            running[name] = running.get(name, 0) + 1
            peak = max(peak, running[name])
        time.sleep(0.05)
        with lock:
            running[name] -= 1
        return i

    results: list[list[int]] = []

    def fan_out() -> None:
        calls = [lambda n=n, i=i: call(n, i) for i, n in enumerate(["a", "b"])]
        results.append(parallel.run_per_shard(calls, names=["a", "b"], concurrency=limit))

    threads = [threading.Thread(target=fan_out) for _ in range(fan_outs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return peak, results


def test_concurrency_bounds_the_calls_running_on_one_name_at_once() -> None:
    peak, results = _peak_per_name(1, 3)
    assert results == [[0, 1]] * 3
    assert peak == 1
    peak, _ = _peak_per_name(2, 3)
    assert peak == 2


def test_the_deadline_holds_while_calls_wait_for_a_slot_and_cancelled_ones_never_run() -> None:
    release = threading.Event()
    taken = threading.Event()
    ran: list[str] = []

    def hold() -> None:
        taken.set()
        release.wait(30)

    holder = threading.Thread(
        target=parallel.run_per_shard,
        args=([hold, lambda: None],),
        kwargs={"names": ["a", "b"], "concurrency": 1},
    )
    holder.start()
    try:
        assert taken.wait(5)
        with pytest.raises(FanOutTimeoutError) as raised:
            parallel.run_per_shard(
                [lambda: ran.append("a"), lambda: ran.append("b")],
                names=["a", "b"],
                timeout=0.3,
                concurrency=1,
            )
        assert holder.is_alive()  # the deadline came while the slot was still held
        assert raised.value.shards == ["a"]
    finally:
        release.set()
        holder.join(5)
    time.sleep(0.1)
    assert ran == ["b"]  # the call that waited past the deadline was cancelled


def test_idle_workers_exit_and_run_their_exit_hooks() -> None:
    closed: list[str] = []
    hook = lambda: closed.append(threading.current_thread().name)  # noqa: E731
    parallel.on_worker_exit(hook)
    parallel.set_idle_timeout(0.2)
    try:
        parallel.run_per_shard([lambda: None] * 2, names=["a", "b"])
        deadline = time.monotonic() + 5
        while len(closed) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        parallel.set_idle_timeout(parallel.DEFAULT_IDLE_TIMEOUT_S)
        parallel._at_exit.remove(hook)
    assert len(closed) == 2 and all(n.startswith("uid_fields-fanout") for n in closed)
    assert parallel.run_per_shard([lambda: 1, lambda: 2], names=["a", "b"]) == [1, 2]


def test_tidy_runs_the_tidy_hooks_on_each_worker_that_ran_a_call() -> None:
    tidied: list[str] = []
    ran: set[str] = set()

    def hook() -> float | None:
        tidied.append(threading.current_thread().name)
        return None

    def call() -> None:
        ran.add(threading.current_thread().name)
        time.sleep(0.05)

    parallel.on_worker_tidy(hook)
    try:
        parallel.tidy()
        time.sleep(0.1)
        assert tidied == []  # no worker has run anything
        parallel.run_per_shard([call, call, call], names=["a", "a", "b"])
        parallel.tidy()
        deadline = time.monotonic() + 5
        while len(tidied) < len(ran) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(tidied) == sorted(ran) and len(ran) >= 2  # on their own threads
        parallel.tidy()
        time.sleep(0.1)
        assert len(tidied) == len(ran)  # nothing used since: not woken again
    finally:
        parallel._at_tidy.remove(hook)


def test_a_lowered_concurrency_holds_for_the_calls_already_waiting() -> None:
    peak, _ = _peak_per_name(3, 3)
    assert peak == 3
    peak, results = _peak_per_name(1, 4)  # the same pools, the bound lowered
    assert results == [[0, 1]] * 4
    assert peak == 1


# -- the rules both adapters' fan-outs follow ---------------------------------------------


def test_a_fan_out_runs_at_once_only_on_server_databases_and_outside_shard_work() -> None:
    assert parallel.may_run_at_once(["postgresql", "mysql", "mariadb"], holds_shard_work=False)
    assert not parallel.may_run_at_once(["postgresql", "sqlite"], holds_shard_work=False)
    assert not parallel.may_run_at_once(["postgresql"], holds_shard_work=True)


class Dropped(Exception):
    """What a driver raises for a connection the server closed while it sat idle."""


def test_a_read_on_a_dropped_connection_runs_once_more_and_nothing_else_does() -> None:
    calls: list[int] = []

    def read_failing(times: int, error: Exception) -> int:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return len(calls)

    def is_drop(error: Exception) -> bool:
        return isinstance(error, Dropped)

    assert parallel.once_more_after_drop(lambda: read_failing(1, Dropped()), is_drop) == 2
    calls.clear()
    with pytest.raises(Dropped):  # once more, not twice
        parallel.once_more_after_drop(lambda: read_failing(2, Dropped()), is_drop)
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(ValueError):  # an error of the query itself: not again
        parallel.once_more_after_drop(lambda: read_failing(1, ValueError()), is_drop)
    assert len(calls) == 1
    calls.clear()
    with pytest.raises(Dropped):  # the deadline cut it: not again
        parallel.once_more_after_drop(lambda: read_failing(1, Dropped()), is_drop, cut=lambda: True)
    assert len(calls) == 1


def test_calls_kept_here_run_on_this_thread_while_the_pool_runs_the_others() -> None:
    meet = threading.Barrier(3, timeout=5)  # only passes if the three run at once
    me = threading.get_ident()

    def call(i: int) -> tuple[int, bool]:
        meet.wait()
        return i, threading.get_ident() == me

    calls = [lambda i=i: call(i) for i in range(3)]
    found = parallel.run_per_shard(calls, names=["s0", "s1", "s2"], here=[1])
    assert found == [(0, False), (1, True), (2, False)]
    # Every call here: one after another on this thread, as before.
    assert parallel.run_per_shard([lambda: threading.get_ident()] * 2, here=[0, 1]) == [me, me]


def test_a_call_kept_here_past_the_deadline_is_interrupted_and_named() -> None:
    released = threading.Event()

    def stuck() -> str:
        parallel.on_timeout(released.set)  # the timer thread interrupts this thread's call
        released.wait(30)
        raise ConnectionError("socket shut down")

    with pytest.raises(FanOutTimeoutError, match="s1") as raised:
        parallel.run_per_shard([lambda: "a", stuck], names=["s0", "s1"], timeout=0.3, here=[1])
    assert raised.value.shards == ["s1"]
    assert released.is_set()  # the interrupt reached the call kept here
