"""Argument checks shared by the whole core, so every entry point words an error alike.

A bool is an ``int`` to Python but never a count, an id or a node value here: ``True``
passed as a worker id is a mistake to report, not the worker 1.
"""

from __future__ import annotations

import math

__all__ = ["count", "in_range", "integer", "non_negative_number", "shown"]

#: Ints of more digits than this are described by size in messages, not written out:
#: Python refuses to turn an int of more than 4300 digits into a string (ValueError),
#: and a message that raises while being written turns a reported mistake into a crash.
_SHOWN_DIGITS = 40

#: The longest ``repr`` a message quotes; longer ones are cut (a pasted file, say).
_SHOWN_CHARS = 80


def shown(value: object) -> str:
    """``repr(value)`` for an error message, whatever the value: never raises, and never
    longer than a line.

    Settings are arbitrary data. ``repr`` of an int of 5,000 digits raises ValueError,
    of a deeply nested list RecursionError, and a 1 MB string would drown the message;
    each becomes a short description instead.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        # bit_length() * log10(2), a lower bound that never under-counts by more than 1
        digits = value.bit_length() * 30103 // 100000 + 1
        if digits > _SHOWN_DIGITS:
            return f"{'-' if value < 0 else ''}<an int of about {digits} digits>"
    try:
        text = repr(value)
    except Exception:
        return f"<a {type(value).__name__}>"
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 4]}...{text[-1]}"


def integer(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``low..high``; TypeError or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {shown(value)}")
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            allowed = f"{low}..{high}"
        elif low is not None:
            allowed = f">= {low}"
        else:
            allowed = f"<= {high}"
        raise ValueError(f"{name}={shown(value)} is out of range {allowed}")
    return value


def in_range(name: str, value: int, maximum: int, origin: str = "") -> int:
    """A node value already known to be an int, in ``0..maximum``; ``origin`` says where
    it came from (an environment variable, a lease) for the message."""
    if not 0 <= value <= maximum:
        raise ValueError(f"{name}={shown(value)}{origin} is out of range 0..{maximum}")
    return value


def count(value: object) -> int:
    """How many ids a caller asked for: an int >= 0."""
    return integer("count", value, 0)


def positive_seconds(name: str, value: object) -> float:
    """A finite number of seconds > 0: a deadline of 0 would fail everything, and one of
    NaN or infinity would never pass."""
    seconds = non_negative_number(name, value)
    if seconds <= 0:
        raise ValueError(f"{name} must be a number of seconds > 0, got {shown(value)}")
    return float(seconds)


def non_negative_number(name: str, value: object) -> float:
    """A finite int or float >= 0 (a tolerance in ms, say): NaN and infinity are errors,
    since a comparison with NaN is always false and would silently disable the check;
    so is an int too large for a float (``math.isfinite`` would raise OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {shown(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:
        finite = False
    if not finite or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {shown(value)}")
    return value
