"""Id generators: clock, sequence, lock, fork and clock-rollback policy.

Every integer generator hands out the ids of the current time unit from a
precomputed ``range`` iterator. ``next()`` on it is atomic under the GIL, so the fast
path takes no lock; the lock is only taken to start the block of a new time unit, to
wait out a full one, or to apply the clock policy.
"""

from __future__ import annotations

import os
import random
import threading
import weakref
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, Literal

from .clock import Clock, system_clock
from .errors import ClockMovedBackwardsError, ForkedGeneratorError, LayoutExhaustedError
from .layouts import DecimalLayout, DecimalParts, IntLayout, SnowflakeLayout, SnowflakeParts
from .timeutil import format_ms
from .workers import NodeValue, resolve_node

__all__ = [
    "DecimalGenerator",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
]

OnFork = Literal["raise", "continue"]
_EMPTY: Iterator[int] = iter(())

# Generators alive in this process, told about fork() so children never reuse state.
_live: weakref.WeakSet[Any] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for generator in list(_live):
        generator._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count must be an int, got {count!r}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    return count


class _BlockGenerator:
    """Shared machinery: one block of ids per time unit, refilled under a lock."""

    layout: IntLayout

    def __init__(
        self,
        layout: IntLayout,
        *,
        clock: Clock | None,
        max_backward_ms: float,
        on_fork: OnFork,
    ) -> None:
        if max_backward_ms < 0:
            raise ValueError(f"max_backward_ms must be >= 0, got {max_backward_ms}")
        if on_fork not in ("raise", "continue"):
            raise ValueError(f"on_fork must be 'raise' or 'continue', got {on_fork!r}")
        self.layout = layout
        self.clock = clock if clock is not None else system_clock()
        self.max_backward_ms = max_backward_ms
        self.on_fork = on_fork
        self._unit_ns = layout.time_unit_ms * 1_000_000
        self._epoch_ns = layout.epoch_ms * 1_000_000
        self._source = self.clock.source
        self._offset = self.clock.offset_ns - self._epoch_ns  # source() + _offset = ns since epoch
        self._lock = threading.Lock()
        self._unit = -1
        self._it: Iterator[int] = _EMPTY
        self._forked_from: int | None = None
        now_ms = self.clock.now_ms()
        if now_ms < layout.epoch_ms:
            raise ValueError(
                f"epoch {format_ms(layout.epoch_ms)} is in the future (now is "
                f"{format_ms(now_ms)}): ids before it cannot be represented"
            )
        _live.add(self)

    # -- the block of a time unit (subclasses) ------------------------------------------
    def _block(self, unit: int) -> range:
        raise NotImplementedError

    def _refresh_node_after_fork(self) -> bool:
        """Take a new node identity in a forked child; False if it cannot."""
        return False

    # -- public API ----------------------------------------------------------------------
    def next_id(self) -> int:
        if (self._source() + self._offset) // self._unit_ns == self._unit:
            try:
                return next(self._it)
            except StopIteration:
                pass
        with self._lock:
            while True:
                self._sync_block_locked()
                value = next(self._it, None)
                if value is not None:
                    return value
                self._wait_next_unit_locked()

    def next_ids(self, count: int) -> list[int]:
        """``count`` increasing ids in one lock hold: the fast path for bulk inserts."""
        count = _check_count(count)
        out: list[int] = []
        with self._lock:
            while True:
                self._sync_block_locked()
                out.extend(islice(self._it, count - len(out)))
                if len(out) >= count:
                    return out
                self._wait_next_unit_locked()

    # -- locked helpers ------------------------------------------------------------------
    def _sync_block_locked(self) -> None:
        """Make ``_it`` the block of the current time unit, applying the clock policy."""
        if self._forked_from is not None:
            self._raise_forked()
        while True:
            now = self._source() + self._offset
            unit = now // self._unit_ns
            if unit == self._unit:
                return
            if unit > self._unit:
                if unit > self.layout.max_unit:
                    raise LayoutExhaustedError(
                        f"{self.layout!r} is exhausted: ids stop fitting at "
                        f"{self.layout.exhausted_at.isoformat()}; choose a later epoch or "
                        "more time bits"
                    )
                if unit < 0:
                    raise ValueError("the clock is before the layout's epoch")
                self._it = iter(self._block(unit))
                self._unit = unit
                return
            behind_ns = self._unit * self._unit_ns - now
            if behind_ns > self.max_backward_ms * 1_000_000:
                raise ClockMovedBackwardsError(behind_ns / 1e6, self.max_backward_ms)
            self.clock.wait_until_ns(self._unit * self._unit_ns + self._epoch_ns)

    def _wait_next_unit_locked(self) -> None:
        self.clock.wait_until_ns((self._unit + 1) * self._unit_ns + self._epoch_ns)

    # -- fork ----------------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._unit = -1
        self._it = _EMPTY
        if self.on_fork == "raise" and not self._refresh_node_after_fork():
            self._forked_from = os.getppid()

    def _raise_forked(self) -> None:
        raise ForkedGeneratorError(
            f"{self!r} was created in process {self._forked_from} and inherited by "
            f"forked process {os.getpid()}: parent and children would share its node id "
            "and issue the same ids. Create generators after the fork with a per-process "
            "node id (an environment variable per worker, or a lease), or pass "
            "on_fork='continue' if the parent never issues ids after forking one child."
        )


class SnowflakeGenerator(_BlockGenerator):
    """Snowflake ids of one node: ``SnowflakeGenerator(layout=TWITTER, datacenter=1, worker=3)``.

    Sequence overflow waits for the next time unit; a clock that goes back up to
    ``max_backward_ms`` is waited out, further is a ``ClockMovedBackwardsError``.
    """

    layout: SnowflakeLayout

    def __init__(
        self,
        layout: SnowflakeLayout,
        *,
        clock: Clock | None = None,
        max_backward_ms: float = 10,
        on_fork: OnFork = "raise",
        **fields: NodeValue,
    ) -> None:
        if not isinstance(layout, SnowflakeLayout):
            raise TypeError(f"layout must be a SnowflakeLayout, got {layout!r}")
        self._sources = dict(fields)
        self.node = self._resolve_node(layout)
        super().__init__(layout, clock=clock, max_backward_ms=max_backward_ms, on_fork=on_fork)

    def _resolve_node(self, layout: SnowflakeLayout) -> dict[str, int]:
        node = {
            name: resolve_node(source, field=name, bits=layout.field_bits(name))
            for name, source in self._sources.items()
        }
        self._node_bits = layout.node_bits(node)
        return node

    def _refresh_node_after_fork(self) -> bool:
        sources = self._sources.values()
        if not sources or not all(getattr(s, "per_process", False) for s in sources):
            return False
        self.node = self._resolve_node(self.layout)
        return True

    def _block(self, unit: int) -> range:
        layout = self.layout
        start = (unit << layout.time_shift) | self._node_bits
        step = 1 << layout.sequence_shift
        return range(start, start + (layout.max_sequence + 1) * step, step)

    def decompose(self, value: object) -> SnowflakeParts:
        return self.layout.decompose(value)

    def __repr__(self) -> str:
        node = ", ".join(f"{k}={v}" for k, v in self.node.items())
        name = self.layout.name or "custom"
        return f"<SnowflakeGenerator {name}{' ' + node if node else ''}>"


class ShardedIdGenerator:
    """Instagram-style ids that carry a logical shard: ``next_id(shard=5)``.

    One sequence per shard, as each of Instagram's shards has its own. The sequence is
    per process: processes that write the same shard need distinct node fields in the
    layout (or database-side generation), exactly as separate snowflake workers do.
    """

    def __init__(
        self,
        layout: SnowflakeLayout,
        *,
        shard_field: str = "shard",
        clock: Clock | None = None,
        max_backward_ms: float = 10,
        on_fork: OnFork = "raise",
        **fields: NodeValue,
    ) -> None:
        if not isinstance(layout, SnowflakeLayout):
            raise TypeError(f"layout must be a SnowflakeLayout, got {layout!r}")
        if shard_field not in layout.field_names:
            raise ValueError(
                f"layout has no {shard_field!r} field to carry the shard; its fields are "
                f"{list(layout.field_names)}"
            )
        if shard_field in fields:
            raise TypeError(f"{shard_field!r} is chosen per id; pass it to next_id()")
        self.layout = layout
        self.shard_field = shard_field
        self.shard_bits = layout.field_bits(shard_field)
        self.logical_shards = 1 << self.shard_bits
        self._clock = clock if clock is not None else system_clock()
        self._max_backward_ms = max_backward_ms
        self._on_fork: OnFork = on_fork
        self._fields: dict[str, Any] = dict(fields)
        self._per_shard: dict[int, SnowflakeGenerator] = {}
        self._lock = threading.Lock()
        _live.add(self)
        # Validate the epoch and node fields now, not at the first id.
        self._generator(0)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the per-shard generators reset themselves

    def shard_for_key(self, shard_key: object) -> int:
        """The logical shard of a shard key: ``key % 2**shard_bits``."""
        if isinstance(shard_key, bool) or not isinstance(shard_key, int):
            raise TypeError(f"shard_key must be an int, got {shard_key!r}")
        return shard_key % self.logical_shards

    def _shard(self, shard: int | None, shard_key: object) -> int:
        if (shard is None) == (shard_key is None):
            raise TypeError("give exactly one of shard= or shard_key=")
        if shard is None:
            return self.shard_for_key(shard_key)
        if isinstance(shard, bool) or not isinstance(shard, int):
            raise TypeError(f"shard must be an int, got {shard!r}")
        if not 0 <= shard < self.logical_shards:
            raise ValueError(f"shard={shard} is out of range 0..{self.logical_shards - 1}")
        return shard

    def _generator(self, shard: int) -> SnowflakeGenerator:
        generator = self._per_shard.get(shard)
        if generator is None:
            with self._lock:
                generator = self._per_shard.get(shard)
                if generator is None:
                    generator = SnowflakeGenerator(
                        self.layout,
                        clock=self._clock,
                        max_backward_ms=self._max_backward_ms,
                        on_fork=self._on_fork,
                        **{self.shard_field: shard, **self._fields},
                    )
                    self._per_shard[shard] = generator
        return generator

    def next_id(self, shard: int | None = None, *, shard_key: object = None) -> int:
        return self._generator(self._shard(shard, shard_key)).next_id()

    def next_ids(
        self, count: int, shard: int | None = None, *, shard_key: object = None
    ) -> list[int]:
        return self._generator(self._shard(shard, shard_key)).next_ids(count)

    def shard_of(self, value: object) -> int:
        """The logical shard embedded in an id."""
        return self.layout.field_of(self.layout.coerce(value), self.shard_field)

    def decompose(self, value: object) -> SnowflakeParts:
        return self.layout.decompose(value)

    @property
    def node(self) -> dict[str, int]:
        return self._generator(0).node | {}

    def __repr__(self) -> str:
        return f"<ShardedIdGenerator {self.layout.name or 'custom'} shards={self.logical_shards}>"


class DecimalGenerator(_BlockGenerator):
    """Decimal ids (``time * 10**7 + random * 10 + server`` for the default layout).

    The random digits start at a random value in each time unit and then count up, so
    one generator never repeats and its ids increase.
    """

    layout: DecimalLayout

    def __init__(
        self,
        layout: DecimalLayout,
        *,
        server: NodeValue = 0,
        clock: Clock | None = None,
        max_backward_ms: float = 10,
        on_fork: OnFork = "raise",
    ) -> None:
        if not isinstance(layout, DecimalLayout):
            raise TypeError(f"layout must be a DecimalLayout, got {layout!r}")
        self._server_source = server
        self.server = resolve_node(server, field="server", bits=None, maximum=layout.max_server)
        self._random = random.Random()
        super().__init__(layout, clock=clock, max_backward_ms=max_backward_ms, on_fork=on_fork)

    @property
    def node(self) -> Mapping[str, int]:
        return {"server": self.server}

    def _refresh_node_after_fork(self) -> bool:
        self._random = random.Random()
        if not getattr(self._server_source, "per_process", False):
            return False
        self.server = resolve_node(
            self._server_source, field="server", bits=None, maximum=self.layout.max_server
        )
        return True

    def _block(self, unit: int) -> range:
        layout = self.layout
        # Start in the lower half so every unit still has room for many ids.
        first = self._random.randrange((layout.max_random + 1) // 2 or 1)
        base = unit * layout.time_scale + self.server
        return range(
            base + first * layout.server_scale,
            base + (layout.max_random + 1) * layout.server_scale,
            layout.server_scale,
        )

    def decompose(self, value: object) -> DecimalParts:
        return self.layout.decompose(value)

    def __repr__(self) -> str:
        return f"<DecimalGenerator {self.layout.name or 'custom'} server={self.server}>"
