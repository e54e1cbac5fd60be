"""Read replicas per shard: which database answers a read of a shard's rows.

A shard's primary takes every write; its replicas (streaming copies, a little behind)
can take reads. A read goes to a replica unless that would show stale data the reader
can tell is stale:

* **inside a transaction** on the primary, a read must see the transaction's writes;
* **right after a write** by the same reader (a request, a session), the replica may not
  have received it yet: the primary is *pinned* for a short time (Django's
  ``READ_YOUR_WRITES_SECONDS``, SQLAlchemy's ``read_your_writes_seconds=``): read-your-writes.

``ReadReplicas`` makes that choice for both ORM adapters: Django keeps one ``Pins`` per
request (a context variable reset when a request starts), SQLAlchemy one per session.
Replicas of a primary take turns (round robin), so the load spreads evenly.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from .._internal import validate as check

__all__ = ["DEFAULT_PIN_SECONDS", "Pins", "ReadReplicas"]

T = TypeVar("T")

#: How long reads of a shard stay on its primary after a write to it.
DEFAULT_PIN_SECONDS = 5.0


class Pins:
    """Primaries that were written to recently, each until a deadline."""

    def __init__(
        self,
        seconds: float = DEFAULT_PIN_SECONDS,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        # finite: a NaN deadline never passes, and would pin the primary for good (the
        # default is not checked again: a session per request makes one of these)
        self.seconds = (
            seconds
            if seconds is DEFAULT_PIN_SECONDS
            else float(check.non_negative_number("pin seconds", seconds))
        )
        self.clock = clock or time.monotonic
        self._until: dict[str, float] = {}

    def pin(self, primary: str) -> None:
        """``primary`` was just written to: read it there for ``seconds``."""
        self._until[primary] = self.clock() + self.seconds

    def pinned(self, primary: str) -> bool:
        until = self._until.get(primary)
        if until is None:
            return False
        if self.clock() >= until:
            del self._until[primary]
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter([p for p in list(self._until) if self.pinned(p)])

    def clear(self) -> None:
        self._until.clear()

    def __repr__(self) -> str:
        return f"<Pins {sorted(self)} for {self.seconds:g} s>"


class ReadReplicas(Generic[T]):
    """The replicas of each primary (aliases for Django, engines for SQLAlchemy)."""

    def __init__(self, replicas: Mapping[str, Sequence[T]]) -> None:
        self.replicas: dict[str, tuple[T, ...]] = {}
        for primary, found in replicas.items():
            if isinstance(found, (str, bytes)) or not isinstance(found, Sequence):
                raise TypeError(f"the replicas of {primary!r} must be a list, got {found!r}")
            if primary in found:
                raise ValueError(f"{primary!r} is named as a replica of itself")
            if found:
                self.replicas[primary] = tuple(found)
        self._turns = {primary: itertools.count() for primary in self.replicas}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.replicas)

    def read_from(self, primary: str, *, in_transaction: bool, pins: Pins | None) -> T | None:
        """The replica to read ``primary``'s rows from, or None: read the primary."""
        found = self.replicas.get(primary)
        if not found or in_transaction or (pins is not None and pins.pinned(primary)):
            return None
        with self._lock:
            turn = next(self._turns[primary])
        return found[turn % len(found)]

    def __repr__(self) -> str:
        return f"<ReadReplicas {self.replicas!r}>"
