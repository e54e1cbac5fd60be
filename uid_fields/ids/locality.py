"""Groupon's locality UUID ("vB"), byte-compatible with locality-uuid.java.

``wwwwwwww-xxxx-byyy-yyyy-zzzzzzzzzzzz``: w = 32-bit counter, x = pid mod 65536,
literal ``b``, y = low 28 bits of the MAC, z = 48-bit Unix ms. Variable mode (default)
adds the prime 198491317 per id and writes the counter nibble-reversed, so consecutive
ids start with different characters and spread over range-sharded stores. Sequential
mode adds 1 and writes it in order, seeded from MD5 of the UTC time as ``yyyyMMddHHm``
(a 10-minute window, as the Java source does, though its README says "hour"), so ids
made close together share their first characters.

These are not RFC 4122 UUIDs: the variant bits are not set and ``UUID.version`` is None.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import threading
import uuid
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from .._internal import forks, validate
from .._internal.timeutil import datetime_from_ms, describe_ms
from ..clock import Clock, system_clock
from ..errors import ForkedGeneratorError

__all__ = [
    "INCREMENT",
    "LocalityParts",
    "LocalityUUIDGenerator",
    "coerce_uuid",
    "compose",
    "decompose",
    "mac_bits",
    "reverse_nibbles",
    "sequential_seed",
]

INCREMENT = 198491317  # prime, coprime to 2**32: a full period of 2**32 counters
VERSION = 0xB
_MASK32 = 0xFFFFFFFF
_MAX_MS = (1 << 48) - 1
_new_uuid = object.__new__
_set = object.__setattr__
_UUID = uuid.UUID
# The slot setters of uuid.UUID, called directly: cheaper than object.__setattr__.
_set_int = uuid.UUID.__dict__["int"].__set__
_set_safe = uuid.UUID.__dict__["is_safe"].__set__
_UNKNOWN = uuid.SafeUUID.unknown
# Every 16-bit value with its 4 hex digits reversed (256 KiB), so that reversing the 8
# digits of a counter on the hot path is two lookups instead of bytes round trips.
# Filled by the first user, not at import: most processes never make a locality UUID.
_REV16 = array("I")
# Java writes the block's 4th byte as ``((c & 0xF000000) >> 20) | ((c & 0xF0000000) >> 28)``
# on a signed int: with the counter's top bit set, the arithmetic shift fills the byte's
# high nibble (the 7th hex digit) with f. Indexed by that top bit.
_JAVA_SIGN = (0, 0xF0)
_rev16_lock = threading.Lock()


def _fill_rev16() -> None:
    with _rev16_lock:
        if not _REV16:
            _REV16.extend(
                (d << 12) | (c << 8) | (b << 4) | a
                for a in range(16)
                for b in range(16)
                for c in range(16)
                for d in range(16)
            )


def reverse_nibbles(value: int) -> int:
    """The 32-bit value with its 8 hex digits in reverse order (its own inverse)."""
    if not _REV16:
        _fill_rev16()
    value &= _MASK32
    return (_REV16[value & 0xFFFF] << 16) | _REV16[value >> 16]


def _uuid_from_int(value: int) -> uuid.UUID:
    # uuid.UUID(int=...) re-validates its arguments; this value is in range by construction.
    result = _new_uuid(uuid.UUID)
    _set(result, "int", value)
    _set(result, "is_safe", _UNKNOWN)
    return result


def sequential_seed(at: datetime) -> int:
    """The sequential-mode starting counter for an instant (Java: MD5 of yyyyMMddHHm)."""
    stamp = at.astimezone(UTC).strftime("%Y%m%d%H%M")[:11]
    return int.from_bytes(hashlib.md5(stamp.encode()).digest()[:4], "little")


@dataclass(frozen=True, slots=True)
class LocalityParts:
    """A decoded locality UUID."""

    value: uuid.UUID
    block: int  # the first 8 hex digits as written
    pid: int
    mac: int  # low 28 bits of the MAC
    timestamp_ms: int

    @property
    def counter(self) -> int:
        """The variable-mode counter (the block read nibble-reversed)."""
        return reverse_nibbles(self.block)

    @property
    def datetime(self) -> datetime:
        return datetime_from_ms(self.timestamp_ms)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": str(self.value),
            "timestamp_ms": self.timestamp_ms,
            "datetime": describe_ms(self.timestamp_ms),
            "counter": self.counter,
            "block": f"{self.block:08x}",
            "pid": self.pid,
            "mac": f"{self.mac:07x}",
        }


def coerce_uuid(value: object) -> uuid.UUID:
    """A UUID id as a stdlib ``uuid.UUID``, under one rule for every adapter and entry
    point (lookups, ``get()``, URL converters, forms after their own stripping), as
    ``coerce_id`` is for integer ids: a ``uuid.UUID``, or text exactly as ``uuid.UUID``
    reads it (hyphens or not, braces, ``urn:uuid:``, any case) and nothing around it, so
    a space or a newline is no id. An int (Django's ``UUIDField`` would read a UUID's
    integer; no URL or form gives one, and placement refuses it), a bool, bytes or
    anything else is a TypeError, malformed text a ValueError: a malformed id matches
    no row."""
    if type(value) is uuid.UUID:
        return value
    if isinstance(value, uuid.UUID):
        return uuid.UUID(int=value.int)
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError:
            raise ValueError(f"{value[:48]!r} is not a UUID") from None
    raise TypeError(f"expected a uuid.UUID or its string, got {type(value).__name__}")


def _as_uuid(value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not a UUID") from None
    if isinstance(value, bytes) and len(value) == 16:
        return uuid.UUID(bytes=value)
    raise TypeError(f"expected a UUID or its string, got {type(value).__name__}")


def decompose(value: object) -> LocalityParts:
    """The parts of a locality UUID (a UUID, its string form, or its 16 bytes)."""
    u = _as_uuid(value)
    number = u.int
    version = (number >> 76) & 0xF
    if version != VERSION:
        raise ValueError(f"{u} is not a locality UUID: version nibble is {version:x}, not b")
    return LocalityParts(
        value=u,
        block=number >> 96,
        pid=(number >> 80) & 0xFFFF,
        mac=(number >> 48) & 0xFFFFFFF,
        timestamp_ms=number & _MAX_MS,
    )


def compose(
    *, counter: int, pid: int, mac: int, timestamp_ms: int, sequential: bool = False
) -> uuid.UUID:
    """The locality UUID of these parts; ``counter`` is written as its mode writes it."""
    _check("counter", counter, _MASK32)
    _check("pid", pid, 0xFFFF)
    _check("mac", mac, 0xFFFFFFF)
    _check("timestamp_ms", timestamp_ms, _MAX_MS)
    block = counter if sequential else reverse_nibbles(counter) | _JAVA_SIGN[counter >> 31]
    return _uuid_from_int(_middle(pid, mac) | (block << 96) | timestamp_ms)


def block_of(value: object) -> int:
    """The first 32 bits as written: what range-sharded stores see first."""
    return _as_uuid(value).int >> 96


def _check(name: str, value: object, maximum: int) -> int:
    return validate.integer(name, value, 0, maximum)


def _middle(pid: int, mac: int) -> int:
    return (pid << 80) | (VERSION << 76) | (mac << 48)


def mac_bits(mac: int | str | None) -> int:
    """The 28 MAC bits a locality UUID carries: this host's (None), a 28-bit int, or the
    low 28 bits of a MAC string like ``02:42:ac:11:00:02``."""
    if mac is None:
        return uuid.getnode() & 0xFFFFFFF
    if isinstance(mac, str):
        digits = mac.replace(":", "").replace("-", "").strip()
        if len(digits) != 12 or any(c not in "0123456789abcdefABCDEF" for c in digits):
            raise ValueError(f"mac={mac!r} is not a MAC address like 02:42:ac:11:00:02")
        return int(digits, 16) & 0xFFFFFFF
    return _check("mac", mac, 0xFFFFFFF)


# One counter per (mode, pid, MAC) in a process, as the Java class keeps one static
# counter: two generators with the same pid and MAC must not repeat each other's ids.
_counters: dict[tuple[bool, int, int], itertools.count[int]] = {}
_counters_lock = threading.Lock()


@forks.on_fork
def _reset_counters() -> None:
    # Before the generators restart: each then takes a fresh counter for its new pid.
    global _counters_lock
    _counters_lock = threading.Lock()
    _counters.clear()


class LocalityUUIDGenerator:
    """Locality UUIDs without a lock: one atomic ``next()`` per id.

    ``pid`` and ``mac`` default to the process id and this host's MAC; set them (for
    example from a pod ordinal) where containers share both.
    """

    def __init__(
        self,
        sequential: bool = False,
        pid: int | None = None,
        mac: int | str | None = None,
        *,
        clock: Clock | None = None,
        on_fork: Literal["raise", "continue"] = "raise",
        counter: int | None = None,
    ) -> None:
        if counter is not None:
            validate.integer("counter", counter, 0, _MASK32)
        self._first_counter = counter
        if on_fork not in ("raise", "continue"):
            raise ValueError(f"on_fork must be 'raise' or 'continue', got {on_fork!r}")
        self.sequential = bool(sequential)
        self.clock = clock if clock is not None else system_clock()
        self.on_fork = on_fork
        self._fixed_pid = pid is not None
        self.pid = _check("pid", pid, 0xFFFF) if pid is not None else os.getpid() % 65536
        self.mac = mac_bits(mac)
        self._forked_from: int | None = None
        _fill_rev16()
        self._start()
        forks.register(self)

    def _start(self) -> None:
        self._middle = _middle(self.pid, self.mac)
        key = (self.sequential, self.pid, self.mac)
        with _counters_lock:
            counts = _counters.get(key)
            if self._first_counter is not None:
                if counts is not None:
                    raise ValueError(
                        f"a counter for pid {self.pid} and this MAC is already running in "
                        "this process; counter= would restart it and repeat its ids"
                    )
                step = 1 if self.sequential else INCREMENT
                counts = _counters[key] = itertools.count(self._first_counter + step, step)
                self._first_counter = None  # a forked child takes a fresh counter
            elif counts is None:
                if self.sequential:
                    first, step = sequential_seed(datetime_from_ms(self.clock.now_ms())), 1
                else:
                    first, step = random.getrandbits(32), INCREMENT
                # The Java counters add before they read: the first id is first + step.
                # One atomic next() per id (no lock); the mask keeps the low 32 bits.
                counts = _counters[key] = itertools.count(first + step, step)
        self._counts = counts
        self._source = self.clock.source
        self._offset_ns = self.clock.offset_ns

    def next_id(self) -> uuid.UUID:
        if self._forked_from is not None:
            self._raise_forked()
        count = next(self._counts) & _MASK32
        if not self.sequential:
            count = (_REV16[count & 0xFFFF] << 16) | _REV16[count >> 16] | _JAVA_SIGN[count >> 31]
        result = _new_uuid(_UUID)
        _set_int(
            result, (count << 96) | self._middle | (self._source() + self._offset_ns) // 1_000_000
        )
        _set_safe(result, _UNKNOWN)
        return result

    def next_ids(self, count: int) -> list[uuid.UUID]:
        count = validate.count(count)
        if self._forked_from is not None:
            self._raise_forked()
        # Take the counters first: each is still one atomic next(), so concurrent callers
        # interleave without sharing a value.
        counts = [next(self._counts) & _MASK32 for _ in range(count)]
        if not self.sequential:
            rev, sign = _REV16, _JAVA_SIGN
            counts = [(rev[c & 0xFFFF] << 16) | rev[c >> 16] | sign[c >> 31] for c in counts]
        tail = self._middle | (self._source() + self._offset_ns) // 1_000_000
        out: list[uuid.UUID] = []
        append = out.append
        for c in counts:
            result = _new_uuid(_UUID)
            _set_int(result, (c << 96) | tail)
            _set_safe(result, _UNKNOWN)
            append(result)
        return out

    def decompose(self, value: object) -> LocalityParts:
        return decompose(value)

    @property
    def node(self) -> dict[str, int]:
        return {"pid": self.pid, "mac": self.mac}

    def _after_fork_in_child(self) -> None:
        if self._fixed_pid:
            if self.on_fork == "raise":
                self._forked_from = os.getppid()
                return
        else:
            self.pid = os.getpid() % 65536
        self._start()

    def _raise_forked(self) -> None:
        raise ForkedGeneratorError(
            f"{self!r} has a fixed pid={self.pid} and was inherited by forked process "
            f"{os.getpid()} from {self._forked_from}: both would issue ids with the same "
            "pid and MAC. Give each process its own pid value, or leave pid unset."
        )

    def __repr__(self) -> str:
        mode = "sequential" if self.sequential else "variable"
        return f"<LocalityUUIDGenerator {mode} pid={self.pid} mac={self.mac:07x}>"
