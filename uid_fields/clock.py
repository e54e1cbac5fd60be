"""Clocks for generators.

A generator reads time as ``source() + offset_ns``. The system clock anchors the wall
clock once and then follows ``time.monotonic_ns()``, so an NTP step backwards inside a
running process cannot make ids repeat. The manual clock lets tests move time at will,
backwards included, without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "ManualClock", "SystemClock"]

_SPIN_NS = 150_000  # below this, spin instead of sleeping: time.sleep overshoots ~60 µs


class Clock:
    """Unix time in nanoseconds as ``source() + offset_ns``.

    Generators read ``source`` and ``offset_ns`` directly on their hot path, so the
    split (a builtin callable plus a constant) is part of the interface.
    """

    source: Callable[[], int]
    offset_ns: int

    def now_ns(self) -> int:
        return self.source() + self.offset_ns

    def now_ms(self) -> int:
        return self.now_ns() // 1_000_000

    def wait_until_ns(self, target_ns: int) -> None:
        """Block until ``now_ns() >= target_ns``."""
        raise NotImplementedError


class SystemClock(Clock):
    """Wall-clock anchor plus monotonic deltas."""

    def __init__(self) -> None:
        self.source = time.monotonic_ns
        self.offset_ns = time.time_ns() - time.monotonic_ns()

    def wait_until_ns(self, target_ns: int) -> None:
        source, offset = self.source, self.offset_ns
        while True:
            remaining = target_ns - (source() + offset)
            if remaining <= 0:
                return
            if remaining > _SPIN_NS:
                time.sleep((remaining - _SPIN_NS // 2) / 1e9)

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock(Clock):
    """A clock that only moves when told to; waiting moves it forward instantly.

    ``step_ns`` advances it on every reading, to model time passing between calls.
    """

    def __init__(self, start_ms: int = 1_735_689_600_000, *, step_ns: int = 0) -> None:
        self._ns = start_ms * 1_000_000
        self.step_ns = step_ns
        self.offset_ns = 0
        self.source = self._read
        self.waits: list[int] = []
        self._lock = threading.Lock()

    def _read(self) -> int:
        with self._lock:
            now = self._ns
            self._ns += self.step_ns
            return now

    def set_ms(self, ms: int) -> None:
        with self._lock:
            self._ns = ms * 1_000_000

    def set_ns(self, ns: int) -> None:
        with self._lock:
            self._ns = ns

    def advance_ms(self, ms: float) -> None:
        with self._lock:
            self._ns += int(ms * 1_000_000)

    def wait_until_ns(self, target_ns: int) -> None:
        with self._lock:
            if target_ns > self._ns:
                self.waits.append(target_ns - self._ns)
                self._ns = target_ns

    def __repr__(self) -> str:
        return f"ManualClock(now_ns={self._ns})"


_system_clock: SystemClock | None = None


def system_clock() -> SystemClock:
    """The process-wide system clock (one anchor per process)."""
    global _system_clock
    if _system_clock is None:
        _system_clock = SystemClock()
    return _system_clock
