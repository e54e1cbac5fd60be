"""Where a node field's value (worker id, datacenter, server digit) comes from.

A value is a plain int (configured per deployment) or a source object. A source with
``per_process = True`` hands a forked child its own value; a fixed value cannot, and
generators refuse to reuse it in a child (see ``ForkedGeneratorError``).

A source that is only safe until a deadline is a ``FencedSource``: the leases of
``uid_fields.leases`` (``RedisLease``, ``DatabaseLease``, re-exported here), which the
generators ask "still safe?" at every new time unit.
"""

from __future__ import annotations

import os
from typing import Protocol, TypeGuard, runtime_checkable

from .._internal.validate import in_range
from .leases import DatabaseLease, RedisLease

__all__ = [
    "DatabaseLease",
    "FencedSource",
    "FromEnv",
    "NodeSource",
    "NodeValue",
    "RedisLease",
    "is_fenced",
    "resolve_node",
]


@runtime_checkable
class NodeSource(Protocol):
    """Anything that can produce a node field value for a field of ``bits`` bits."""

    per_process: bool

    def acquire(self, field: str, maximum: int) -> int: ...


NodeValue = int | NodeSource


class FromEnv:
    """A node value read from an environment variable (one per process or pod)."""

    per_process = False

    def __init__(self, variable: str) -> None:
        self.variable = variable

    def acquire(self, field: str, maximum: int) -> int:
        raw = os.environ.get(self.variable)
        if raw is None:
            raise ValueError(
                f"environment variable {self.variable} is not set; it must hold the "
                f"{field} id (0..{maximum}) of this process"
            )
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(
                f"environment variable {self.variable}={raw!r} is not an integer {field} id"
            ) from None
        return in_range(field, value, maximum, f" (from ${self.variable})")

    def __repr__(self) -> str:
        return f"FromEnv({self.variable!r})"


def resolve_node(
    source: object, *, field: str, bits: int | None, maximum: int | None = None
) -> int:
    """The value of a node field from an int or a source, range-checked."""
    if maximum is None:
        if bits is None:
            raise TypeError("give bits or maximum")
        maximum = (1 << bits) - 1
    if isinstance(source, bool):
        raise TypeError(f"{field} must be an int or a node source, got {source!r}")
    if isinstance(source, int):
        return in_range(field, source, maximum)
    if isinstance(source, NodeSource):
        return in_range(field, source.acquire(field, maximum), maximum, f" (from {source!r})")
    raise TypeError(f"{field} must be an int or a node source, got {source!r}")


@runtime_checkable
class FencedSource(Protocol):
    """A node source whose value is only safe until a deadline: a lease.

    Generators call ``current`` when they start a time unit's block and in ``next_ids``
    (never per id); it must not do I/O, except once in a forked child to claim an id of
    its own.
    """

    per_process: bool

    def acquire(self, field: str, maximum: int) -> int: ...

    def current(self, field: str) -> int:
        """The value to use now; ``LeaseLostError`` when it is no longer safe."""
        ...


def is_fenced(source: object) -> TypeGuard[FencedSource]:
    """``isinstance(source, FencedSource)``, answered at once for a plain int value.

    A generator asks it of each node field when it is built, and a sharded generator
    builds one generator per logical shard a keyed write first reaches: the runtime
    check of a Protocol (one attribute lookup per member, on every call) was most of
    that constructor's time, for values that are nearly always ints.
    """
    return source.__class__ is not int and isinstance(source, FencedSource)
