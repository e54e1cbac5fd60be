"""Clock faults with the controllable clock: small steps back wait, big ones refuse,
leaps forward continue; never a duplicate, never an id for a refused call."""

from __future__ import annotations

import pytest

from uid_fields import TWITTER, ClockMovedBackwardsError, ManualClock, SnowflakeGenerator


def make() -> tuple[ManualClock, SnowflakeGenerator]:
    clock = ManualClock(step_ns=50_000)  # 20 readings per ms
    return clock, SnowflakeGenerator(TWITTER, worker=1, clock=clock, max_backward_ms=10)


def test_back_5_ms_waits_it_out() -> None:
    clock, gen = make()
    before = [gen.next_id() for _ in range(20_000)]
    clock.advance_ms(-5)
    after = [gen.next_id() for _ in range(20_000)] + gen.next_ids(5000)
    assert clock.waits and max(clock.waits) <= 5_000_000 + 1_000_000
    everything = before + after
    assert everything == sorted(everything) and len(set(everything)) == len(everything)


def test_back_10_s_raises_and_issues_nothing() -> None:
    clock, gen = make()
    before = gen.next_ids(1000) + [gen.next_id() for _ in range(100)]
    clock.advance_ms(-10_000)
    for call in (gen.next_id, lambda: gen.next_ids(100)):
        with pytest.raises(ClockMovedBackwardsError) as caught:
            call()
        assert caught.value.behind_ms > 9_999
    clock.advance_ms(10_000)  # the clock comes back: ids follow the last one issued
    after = gen.next_ids(1000)
    assert min(after) > max(before)
    assert len(set(before + after)) == 2100


def test_leap_forward_continues() -> None:
    clock, gen = make()
    before = gen.next_ids(3000)
    clock.advance_ms(3_600_000)  # an hour ahead (NTP step, VM resume)
    after = [gen.next_id() for _ in range(3000)]
    gap = TWITTER.decompose(after[0]).timestamp_ms - TWITTER.decompose(before[-1]).timestamp_ms
    assert gap >= 3_600_000
    assert before + after == sorted(before + after) and len(set(before + after)) == 6000
