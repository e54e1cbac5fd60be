"""Clocks for generators, and the monotonic clock leases measure their deadlines on.

A generator reads time as ``source() + offset_ns``. The system clock anchors the wall
clock once and then follows ``time.monotonic_ns()``, so an NTP step backwards inside a
running process cannot make ids repeat. The manual clock lets tests move time at will,
backwards included, without sleeping.

A lease reads a ``MonotonicClock``: seconds that only go forward, a sleep, and a wait on
an event (its renewal thread's pause). The system one is ``time.monotonic``; the manual
one moves only when told to, waking every thread whose wait has come due, one due time
after another, so a test can run minutes of renewals, deadlines and quarantines in
milliseconds, against the real coordinator.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "ManualClock", "ManualMonotonicClock", "MonotonicClock", "SystemClock"]

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


class MonotonicClock:
    """Seconds on ``time.monotonic()``, with the sleep and the wait that go with them.

    Leases take one (``clock=``) so that their deadlines, renewal pauses and quarantine
    waits can run on a ``ManualMonotonicClock`` in tests.
    """

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Until ``event`` is set (True) or ``seconds`` have passed (False)."""
        return event.wait(max(0.0, seconds))

    def __repr__(self) -> str:
        return "MonotonicClock()"


#: How long (real seconds) ``ManualMonotonicClock.advance`` waits for the threads it
#: woke to come back to their next wait before giving up.
_SETTLE_S = 60.0
_POLL_S = 0.005


class ManualMonotonicClock(MonotonicClock):
    """A monotonic clock that moves only when told to (``advance``, or a ``sleep``).

    ``advance(seconds)`` steps time to each due ``wait`` in turn, lets the woken thread
    run until it waits again (or ends), and goes on to the next due time until
    ``seconds`` have passed: a lease's renewal thread renews at every pause it would have
    made in real time, with real I/O, and the call returns once all of it is done.
    ``sleep`` advances the clock by its duration. Waits poll their event every few real
    milliseconds, so ``event.set()`` from another thread is seen without help.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = float(start)
        self._cond = threading.Condition()
        #: thread id -> due time, for threads inside ``wait``.
        self._due: dict[int, float] = {}
        #: Threads woken by time that have not waited again yet.
        self._running: set[int] = set()

    def now(self) -> float:
        with self._cond:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        me = threading.get_ident()
        with self._cond:
            self._running.discard(me)
            due = self._now + max(0.0, seconds)
            self._due[me] = due
            self._cond.notify_all()
            try:
                while True:
                    if event.is_set():
                        return True
                    if self._now >= due:
                        self._running.add(me)  # until it waits again
                        return False
                    self._cond.wait(_POLL_S)
            finally:
                self._due.pop(me, None)
                self._cond.notify_all()

    def advance(self, seconds: float) -> None:
        """Move ``seconds`` forward, running every wait that comes due on the way."""
        me = threading.get_ident()
        with self._cond:
            self._running.discard(me)
            target = self._now + max(0.0, seconds)
            while True:
                self._settle(me)
                upcoming = [due for due in self._due.values() if due <= target]
                self._now = max(self._now, min(upcoming, default=target))
                self._cond.notify_all()
                if not upcoming and self._now >= target:
                    self._settle(me)
                    return

    def _settle(self, me: int) -> None:
        """Until no other thread is due or running (bounded by ``_SETTLE_S`` real s)."""
        give_up = time.monotonic() + _SETTLE_S
        while any(due <= self._now for due in self._due.values()) or self._running - {me}:
            if time.monotonic() > give_up:
                raise TimeoutError(
                    "threads woken by ManualMonotonicClock.advance did not come back to a "
                    f"wait within {_SETTLE_S:g} s"
                )
            self._cond.wait(_POLL_S)

    def __repr__(self) -> str:
        return f"ManualMonotonicClock(now={self.now():g})"
