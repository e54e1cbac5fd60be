"""Argument checks shared by the whole core, so every entry point words an error alike.

A bool is an ``int`` to Python but never a count, an id or a node value here: ``True``
passed as a worker id is a mistake to report, not the worker 1.
"""

from __future__ import annotations

import math

__all__ = ["count", "in_range", "integer", "non_negative_number"]


def integer(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``low..high``; TypeError or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            allowed = f"{low}..{high}"
        elif low is not None:
            allowed = f">= {low}"
        else:
            allowed = f"<= {high}"
        raise ValueError(f"{name}={value} is out of range {allowed}")
    return value


def in_range(name: str, value: int, maximum: int, origin: str = "") -> int:
    """A node value already known to be an int, in ``0..maximum``; ``origin`` says where
    it came from (an environment variable, a lease) for the message."""
    if not 0 <= value <= maximum:
        raise ValueError(f"{name}={value}{origin} is out of range 0..{maximum}")
    return value


def count(value: object) -> int:
    """How many ids a caller asked for: an int >= 0."""
    return integer("count", value, 0)


def non_negative_number(name: str, value: object) -> float:
    """A finite int or float >= 0 (a tolerance in ms, say): NaN and infinity are errors,
    since a comparison with NaN is always false and would silently disable the check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value
