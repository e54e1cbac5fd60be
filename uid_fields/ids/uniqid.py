"""Shard-prefixed PHP ``uniqid()`` ids: ``S PPPP SSSSSSSS UUUUU`` (18 characters).

``S`` is the shard digit, ``PPPP`` a random 4-hex prefix, then PHP's ``uniqid()``:
8 hex digits of Unix seconds and 5 of microseconds. The shard is not chosen: it is the
microseconds (the last 5 hex digits) modulo the number of shards, so writes spread
over shards by time, and any reader can check the leading digit against the rest.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .._internal import forks, validate
from .._internal.timeutil import UNIX_EPOCH
from ..clock import Clock, system_clock
from ..errors import ClockMovedBackwardsError

__all__ = ["LENGTH", "UniqIdGenerator", "UniqIdParts", "compose", "decompose", "shard_of"]

LENGTH = 18
_HEX = frozenset("0123456789abcdef")
_MAX_SECONDS = 0xFFFFFFFF


def _check_total(total_shards: object) -> int:
    return validate.integer("total_shards", total_shards, 1, 10)  # one digit


@dataclass(frozen=True, slots=True)
class UniqIdParts:
    value: str
    shard: int
    prefix: int
    timestamp_us: int

    @property
    def timestamp_ms(self) -> int:
        return self.timestamp_us // 1000

    @property
    def datetime(self) -> datetime:
        return UNIX_EPOCH + timedelta(microseconds=self.timestamp_us)

    @property
    def uniqid(self) -> str:
        """The PHP ``uniqid()`` part (13 hex digits)."""
        return self.value[5:]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.value,
            "shard": self.shard,
            "prefix": f"{self.prefix:04x}",
            "timestamp_us": self.timestamp_us,
            "datetime": self.datetime.isoformat().replace("+00:00", "Z"),
        }


def compose(*, timestamp_us: int, prefix: int, total_shards: int) -> str:
    total_shards = _check_total(total_shards)
    validate.integer("prefix", prefix, 0, 0xFFFF)
    seconds, micros = divmod(timestamp_us, 1_000_000)
    if not 0 <= seconds <= _MAX_SECONDS:
        raise ValueError(f"timestamp_us={timestamp_us} does not fit 8 hex digits of seconds")
    return f"{micros % total_shards}{prefix:04x}{seconds:08x}{micros:05x}"


def decompose(value: object, total_shards: int) -> UniqIdParts:
    """The parts of a shard-prefixed uniqid; ValueError if any character is off."""
    total_shards = _check_total(total_shards)
    if not isinstance(value, str):
        raise TypeError(f"expected a uniqid string, got {type(value).__name__}")
    if len(value) != LENGTH:
        raise ValueError(f"{value!r} is not a uniqid: expected {LENGTH} characters")
    head, rest = value[0], value[1:]
    if not head.isdigit() or not head.isascii() or not set(rest) <= _HEX:
        raise ValueError(f"{value!r} is not a uniqid: expected a digit and lowercase hex")
    micros = int(rest[12:], 16)
    if micros >= 1_000_000:
        raise ValueError(f"{value!r} is not a uniqid: {micros} microseconds is over a second")
    shard = int(head)
    if shard != micros % total_shards:
        raise ValueError(
            f"{value!r} is not a uniqid of {total_shards} shards: its shard digit {shard} "
            f"should be {micros % total_shards} (microseconds % shards)"
        )
    return UniqIdParts(
        value=value,
        shard=shard,
        prefix=int(rest[:4], 16),
        timestamp_us=int(rest[4:12], 16) * 1_000_000 + micros,
    )


def shard_of(value: object, total_shards: int) -> int:
    return decompose(value, total_shards).shard


class UniqIdGenerator:
    """Shard-prefixed uniqids; the microseconds strictly increase per generator.

    Like PHP, it waits for the next microsecond rather than repeat one; the random
    prefix separates processes that hit the same microsecond.
    """

    def __init__(
        self, total_shards: int = 4, *, clock: Clock | None = None, max_backward_ms: float = 10
    ) -> None:
        self.total_shards = _check_total(total_shards)
        self.clock = clock if clock is not None else system_clock()
        self.max_backward_ms = validate.non_negative_number("max_backward_ms", max_backward_ms)
        self._lock = threading.Lock()
        self._random = random.Random()
        self._last_us = -1
        forks.register(self)

    def _after_fork_in_child(self) -> None:
        # The child keeps the parent's clock history (it must not repeat a microsecond)
        # but needs its own lock and its own random prefixes.
        self._lock = threading.Lock()
        self._random = random.Random()

    def _next_us_locked(self) -> int:
        clock = self.clock
        while True:
            now_us = clock.now_ns() // 1000
            if now_us > self._last_us:
                self._last_us = now_us
                return now_us
            behind_ms = (self._last_us - now_us) / 1000
            if behind_ms > self.max_backward_ms:
                raise ClockMovedBackwardsError(behind_ms, self.max_backward_ms)
            clock.wait_until_ns((self._last_us + 1) * 1000)

    def next_id(self) -> str:
        with self._lock:
            micros = self._next_us_locked()
            prefix = self._random.getrandbits(16)
        return compose(timestamp_us=micros, prefix=prefix, total_shards=self.total_shards)

    def next_ids(self, count: int) -> list[str]:
        count = validate.count(count)
        return [self.next_id() for _ in range(count)]

    def decompose(self, value: object) -> UniqIdParts:
        return decompose(value, self.total_shards)

    def shard_of(self, value: object) -> int:
        return decompose(value, self.total_shards).shard

    def __repr__(self) -> str:
        return f"<UniqIdGenerator total_shards={self.total_shards}>"
