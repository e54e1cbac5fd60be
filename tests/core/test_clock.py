"""Clocks: the system clock is anchored wall time that never goes back in-process."""

from __future__ import annotations

import time

from uid_fields import ManualClock, SystemClock


def test_system_clock_tracks_wall_time_and_is_monotonic() -> None:
    clock = SystemClock()
    readings = [clock.now_ns() for _ in range(10_000)]
    assert readings == sorted(readings)
    assert abs(clock.now_ms() - time.time_ns() // 1_000_000) < 50


def test_system_clock_waits_until_target() -> None:
    clock = SystemClock()
    target = clock.now_ns() + 2_000_000
    clock.wait_until_ns(target)
    assert clock.now_ns() >= target


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(1000)
    assert clock.now_ms() == clock.now_ms() == 1000
    clock.advance_ms(2.5)
    assert clock.now_ns() == 1_002_500_000
    clock.wait_until_ns(1_005_000_000)
    assert clock.now_ms() == 1005 and clock.waits == [2_500_000]
    clock.set_ms(10)
    assert clock.now_ms() == 10
    stepping = ManualClock(0, step_ns=1000)
    assert [stepping.now_ns() for _ in range(3)] == [0, 1000, 2000]
