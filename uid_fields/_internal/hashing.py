"""The one stable integer hash of the project.

Python's ``hash()`` is salted per process for strings and bytes and differs between
builds, so a shard picked with it would change between two workers of one deployment.
Every place that spreads integers (ids routed by modulo, shard keys, keyless choices)
uses ``mix64`` instead.
"""

from __future__ import annotations

__all__ = ["mix64"]

_MASK64 = (1 << 64) - 1


def mix64(value: int) -> int:
    """SplitMix64's finaliser: a stable, well-spread 64-bit integer hash."""
    z = value & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)
