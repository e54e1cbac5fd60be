"""Generators: order, uniqueness under threads, overflow, clock rollback, lifetime."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

import pytest

from uid_fields import (
    DECIMAL,
    INSTAGRAM,
    SONYFLAKE,
    TWITTER,
    ClockMovedBackwardsError,
    DecimalGenerator,
    FromEnv,
    LayoutExhaustedError,
    ManualClock,
    ShardedIdGenerator,
    SnowflakeGenerator,
    SnowflakeLayout,
)

NOW_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z


def clock_at(ms: int = NOW_MS, step_ns: int = 0) -> ManualClock:
    return ManualClock(ms, step_ns=step_ns)


class TestSnowflakeGenerator:
    def test_ids_strictly_increase_and_carry_the_node(self) -> None:
        gen = SnowflakeGenerator(TWITTER, datacenter=1, worker=3)
        ids = [gen.next_id() for _ in range(20_000)] + gen.next_ids(20_000)
        assert all(a < b for a, b in itertools.pairwise(ids))
        parts = TWITTER.decompose(ids[-1])
        assert (parts.datacenter, parts.worker) == (1, 3)

    def test_sequence_overflow_waits_for_next_unit_never_wraps(self) -> None:
        clock = clock_at()
        gen = SnowflakeGenerator(TWITTER, worker=7, clock=clock)
        ids = [gen.next_id() for _ in range(4097)]
        before, last = TWITTER.decompose(ids[4095]), TWITTER.decompose(ids[4096])
        assert before.sequence == 4095 and before.timestamp_ms == NOW_MS
        assert last.sequence == 0 and last.timestamp_ms == NOW_MS + 1
        assert last.worker == 7 and last.datacenter == 0  # nothing bled into the node bits
        assert clock.waits == [1_000_000]

    def test_next_ids_spans_units_in_one_call(self) -> None:
        clock = clock_at()
        gen = SnowflakeGenerator(TWITTER, clock=clock)
        ids = gen.next_ids(4096 * 3 + 5)
        assert len(set(ids)) == len(ids) == 4096 * 3 + 5
        assert ids == sorted(ids)
        assert TWITTER.decompose(ids[-1]).timestamp_ms == NOW_MS + 3
        assert gen.next_ids(0) == []
        with pytest.raises(ValueError):
            gen.next_ids(-1)

    def test_fields_below_the_sequence(self) -> None:
        gen = SnowflakeGenerator(SONYFLAKE, machine=0xBEEF, clock=clock_at())
        ids = gen.next_ids(300)
        assert {SONYFLAKE.decompose(i).machine for i in ids} == {0xBEEF}
        assert [SONYFLAKE.decompose(i).sequence for i in ids[:3]] == [0, 1, 2]
        assert SONYFLAKE.decompose(ids[256]).timestamp_ms == NOW_MS + 10  # 10 ms units
        assert ids == sorted(ids)

    def test_small_clock_rollback_is_waited_out(self) -> None:
        clock = clock_at()
        gen = SnowflakeGenerator(TWITTER, clock=clock, max_backward_ms=10)
        first = gen.next_ids(10)
        clock.set_ms(NOW_MS - 5)
        after = gen.next_ids(10)
        assert min(after) > max(first)
        assert clock.waits == [5_000_000]

    def test_large_clock_rollback_raises_and_issues_nothing(self) -> None:
        clock = clock_at()
        gen = SnowflakeGenerator(TWITTER, clock=clock, max_backward_ms=10)
        first = gen.next_id()
        clock.set_ms(NOW_MS - 10_000)
        with pytest.raises(ClockMovedBackwardsError, match=r"10000\.000 ms") as info:
            gen.next_id()
        assert info.value.behind_ms == 10_000
        with pytest.raises(ClockMovedBackwardsError):
            gen.next_ids(5)
        clock.set_ms(NOW_MS + 1)  # the clock catches up: ids resume, still increasing
        assert gen.next_id() > first

    def test_rollback_does_not_reset_the_sequence(self) -> None:
        # twitter-archive/snowflake#6: the sequence was reset before the backwards check.
        clock = clock_at()
        gen = SnowflakeGenerator(TWITTER, clock=clock, max_backward_ms=0)
        issued = gen.next_ids(3)
        clock.set_ms(NOW_MS - 1)
        with pytest.raises(ClockMovedBackwardsError):
            gen.next_id()
        clock.set_ms(NOW_MS)
        again = gen.next_id()
        assert again not in issued and TWITTER.decompose(again).sequence == 3

    def test_leap_forward_continues(self) -> None:
        clock = clock_at()
        gen = SnowflakeGenerator(TWITTER, clock=clock)
        first = gen.next_id()
        clock.advance_ms(3_600_000)
        later = gen.next_id()
        assert (
            TWITTER.decompose(later).timestamp_ms
            == NOW_MS + 3_600_000
            > TWITTER.decompose(first).timestamp_ms
        )

    def test_epoch_in_the_future_is_refused(self) -> None:
        with pytest.raises(ValueError, match="in the future"):
            SnowflakeGenerator(TWITTER.replace(epoch_ms=NOW_MS + 1), clock=clock_at())

    def test_no_id_past_the_lifetime(self) -> None:
        tiny = SnowflakeLayout(epoch_ms=NOW_MS - 1000, time_bits=10, sequence_bits=2)
        clock = clock_at(NOW_MS)  # unit 1000 of 1023
        gen = SnowflakeGenerator(tiny, clock=clock)
        ids = gen.next_ids(4 * 24)  # units 1000..1023, the last ones that fit
        assert tiny.decompose(ids[-1]).timestamp_ms == NOW_MS + 23
        with pytest.raises(LayoutExhaustedError, match="exhausted"):
            gen.next_id()

    def test_out_of_range_node_values(self) -> None:
        with pytest.raises(ValueError, match=r"worker=32 is out of range 0\.\.31"):
            SnowflakeGenerator(TWITTER, worker=32)
        with pytest.raises(ValueError, match=r"datacenter=-1"):
            SnowflakeGenerator(TWITTER, datacenter=-1)
        with pytest.raises(ValueError, match="no field 'shard'"):
            SnowflakeGenerator(TWITTER, shard=1)
        with pytest.raises(TypeError):
            SnowflakeGenerator(TWITTER, worker="3")  # type: ignore[arg-type]

    def test_worker_from_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("UID_TEST_WORKER", "17")
        assert SnowflakeGenerator(TWITTER, worker=FromEnv("UID_TEST_WORKER")).node == {"worker": 17}
        monkeypatch.setenv("UID_TEST_WORKER", "40")
        with pytest.raises(ValueError, match=r"worker=40 \(from \$UID_TEST_WORKER\)"):
            SnowflakeGenerator(TWITTER, worker=FromEnv("UID_TEST_WORKER"))
        monkeypatch.delenv("UID_TEST_WORKER")
        with pytest.raises(ValueError, match="UID_TEST_WORKER is not set"):
            SnowflakeGenerator(TWITTER, worker=FromEnv("UID_TEST_WORKER"))


def _hammer(call: Callable[[], list[int]], threads: int) -> list[int]:
    results: list[list[int]] = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads)

    def work(slot: int) -> None:
        barrier.wait()
        results[slot] = call()

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [value for chunk in results for value in chunk]


def test_eight_threads_100k_ids_each_are_unique() -> None:
    gen = SnowflakeGenerator(TWITTER, worker=1)
    ids = _hammer(lambda: [gen.next_id() for _ in range(100_000)], 8)
    assert len(ids) == 800_000
    assert len(set(ids)) == 800_000


def test_threads_mixing_batches_and_single_ids_are_unique_and_ordered_per_thread() -> None:
    gen = SnowflakeGenerator(TWITTER, worker=2)

    def mixed() -> list[int]:
        out: list[int] = []
        for _ in range(50):
            out.extend(gen.next_ids(500))
            out.extend(gen.next_id() for _ in range(500))
        return out

    chunks = _hammer(mixed, 4)
    assert len(set(chunks)) == len(chunks) == 4 * 50_000


class TestShardedIdGenerator:
    def test_explicit_shard_and_shard_key(self) -> None:
        gen = ShardedIdGenerator(INSTAGRAM, clock=clock_at())
        assert INSTAGRAM.decompose(gen.next_id(shard=5)).shard == 5
        assert gen.shard_of(gen.next_id(shard_key=31341)) == 31341 % 8192
        assert gen.shard_for_key(8192 * 3 + 9) == 9

    def test_each_shard_has_its_own_sequence(self) -> None:
        gen = ShardedIdGenerator(INSTAGRAM, clock=clock_at())
        a, b = gen.next_id(shard=1), gen.next_id(shard=2)
        assert INSTAGRAM.decompose(a).sequence == INSTAGRAM.decompose(b).sequence == 0

    def test_1025_ids_in_one_ms_wait_instead_of_wrapping(self) -> None:
        # Instagram's original wraps nextval % 1024 and duplicates above 1024/ms.
        clock = clock_at()
        gen = ShardedIdGenerator(INSTAGRAM, clock=clock)
        ids = gen.next_ids(1025, shard=3)
        assert len(set(ids)) == 1025
        assert INSTAGRAM.decompose(ids[-1]).timestamp_ms == NOW_MS + 1
        assert {INSTAGRAM.decompose(i).shard for i in ids} == {3}

    def test_bad_shards(self) -> None:
        gen = ShardedIdGenerator(INSTAGRAM, clock=clock_at())
        with pytest.raises(ValueError, match=r"shard=8192 is out of range 0\.\.8191"):
            gen.next_id(shard=8192)
        with pytest.raises(TypeError, match="exactly one"):
            gen.next_id()
        with pytest.raises(TypeError, match="exactly one"):
            gen.next_id(shard=1, shard_key=1)
        with pytest.raises(TypeError, match="shard_key must be an int"):
            gen.next_id(shard_key="42")
        with pytest.raises(ValueError, match="no 'shard' field"):
            ShardedIdGenerator(TWITTER)

    def test_instagram_past_sign_bit_refused(self) -> None:
        end = int(INSTAGRAM.exhausted_at.timestamp() * 1000)
        gen = ShardedIdGenerator(INSTAGRAM, clock=clock_at(end))
        with pytest.raises(OverflowError, match="exhausted"):
            gen.next_id(shard=1)


class TestDecimalGenerator:
    def test_ids_increase_and_carry_the_server_digit(self) -> None:
        clock = clock_at(DECIMAL.epoch_ms + 10_000)
        gen = DecimalGenerator(DECIMAL, server=7, clock=clock)
        ids = gen.next_ids(2000)
        assert ids == sorted(ids) and len(set(ids)) == 2000
        assert {i % 10 for i in ids} == {7}
        assert len(str(ids[0])) == 5 + 7  # 10_000 ms, then 6 random digits and 1 server digit

    def test_random_part_exhausted_waits(self) -> None:
        small = DECIMAL.replace(random_digits=2)
        clock = clock_at(DECIMAL.epoch_ms)
        gen = DecimalGenerator(small, clock=clock)
        ids = gen.next_ids(200)  # at most 100 per ms, starting in the lower half
        assert len(set(ids)) == 200
        assert small.decompose(ids[-1]).timestamp_ms >= DECIMAL.epoch_ms + 2

    def test_server_out_of_range(self) -> None:
        with pytest.raises(ValueError, match=r"server=10 is out of range 0\.\.9"):
            DecimalGenerator(DECIMAL, server=10)


def test_mixed_key_hash_spreads_snowflake_keys() -> None:
    # Snowflake customer ids made one per few ms all have sequence 0: their low 13
    # bits are nearly constant, so key % 8192 crowds one logical shard.
    clock = ManualClock(NOW_MS)
    customers = SnowflakeGenerator(TWITTER, worker=2, clock=clock)
    keys = []
    for _ in range(200):
        keys.append(customers.next_id())
        clock.advance_ms(3)
    plain = ShardedIdGenerator(INSTAGRAM, clock=clock)
    mixed = ShardedIdGenerator(INSTAGRAM, clock=clock, key_hash="mixed")
    assert len({plain.shard_for_key(k) for k in keys}) == 1
    spread = {mixed.shard_for_key(k) * 4 // 8192 for k in keys}
    assert spread == {0, 1, 2, 3}
    assert mixed.shard_for_key(keys[0]) == mixed.shard_for_key(keys[0])
    with pytest.raises(ValueError, match="key_hash"):
        ShardedIdGenerator(INSTAGRAM, key_hash="sha1")  # type: ignore[arg-type]
