"""Id generators: clock, sequence, lock, fork and clock-rollback policy.

Every integer generator hands out the ids of the current time unit from a
precomputed ``range`` iterator. ``next()`` on it is atomic under the GIL, so the fast
path takes no lock; the lock is only taken to start the block of a new time unit, to
wait out a full one, or to apply the clock policy.

Fencing: when a node value comes from a lease (``RedisLease``, ``DatabaseLease``), the
generator asks the lease whether it is still safe at the start of every time unit's
block and in every ``next_ids`` call, never per id. A lease stops being safe at its
deadline, a safety margin before it can expire and be claimed elsewhere; after the
deadline the lock-free fast path can still hand out ids of the time unit that had
already started (at most one unit, e.g. 1 ms), and nothing later. Lease margins are
chosen far larger than a time unit (see ``uid_fields.workers``).

A leased node value is claimed at the generator's first id (or when ``node`` is read),
never while the generator is built: building one does no I/O, so a module that builds
generators at import time imports where the coordinator is down or its lease table is
not made yet (a build step). The first id then raises ``CoordinatorUnavailableError``
if the claim fails, and waits out a quarantine if the coordinator just lost its state.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from typing import Any, Literal

from .._internal import forks, validate
from .._internal.hashing import mix64
from .._internal.timeutil import format_ms
from ..clock import Clock, system_clock
from ..errors import ClockMovedBackwardsError, ForkedGeneratorError, LayoutExhaustedError
from .layouts import DecimalLayout, DecimalParts, IntLayout, SnowflakeLayout, SnowflakeParts
from .leases import Lease
from .nodes import FencedSource, NodeValue, is_fenced, resolve_node
from .sequences import SequenceSource

__all__ = [
    "DecimalGenerator",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
]

OnFork = Literal["raise", "continue"]
_EMPTY: Iterator[int] = iter(())


class _BlockGenerator:
    """Shared machinery: one block of ids per time unit, refilled under a lock."""

    layout: IntLayout
    # Leased node fields, checked at each new time unit and in next_ids (fencing), and
    # the values of them that the current block uses.
    _fenced: tuple[tuple[str, FencedSource], ...] = ()
    _leased: dict[str, int] = {}  # replaced per instance, never mutated
    # How many ids the caller wants now: a hint for sequence sources that reserve blocks.
    _want = 1

    def __init__(
        self,
        layout: IntLayout,
        *,
        clock: Clock | None,
        max_backward_ms: float,
        on_fork: OnFork,
    ) -> None:
        max_backward_ms = validate.non_negative_number("max_backward_ms", max_backward_ms)
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
        self._max_unit = layout.max_unit
        # Blocks that need nothing but the unit (no lease to check at each unit, no shared
        # sequence to reserve from) start on the short path of next_id().
        self._plain_blocks = not self._fenced and getattr(self, "_sequence", None) is None
        now_ms = self.clock.now_ms()
        if now_ms < layout.epoch_ms:
            raise ValueError(
                f"epoch {format_ms(layout.epoch_ms)} is in the future (now is "
                f"{format_ms(now_ms)}): ids before it cannot be represented"
            )
        forks.register(self)

    # -- the block of a time unit (subclasses) ------------------------------------------
    def _block(self, unit: int) -> range:
        raise NotImplementedError

    def _more(self, unit: int, want: int) -> range:
        """More ids of ``unit`` once its block ran out; empty when the unit is full."""
        return range(0)

    def _refresh_node_after_fork(self) -> bool:
        """Take a new node identity in a forked child; False if it cannot."""
        return False

    def _reresolve_node(self) -> None:
        """Adopt the values leased node sources hold now (subclasses with leases)."""
        raise NotImplementedError

    def _check_fence_locked(self) -> None:
        """Raise ``LeaseLostError`` unless every leased node value is still safe to use.

        A lease that now holds a freshly claimed value changes the node: the rest of the
        current unit's block is dropped, so ids with the new node start at a later unit
        than any this generator issued before (or at the current unit, built afresh).
        """
        changed = False
        for name, source in self._fenced:
            if source.current(name) != self._leased.get(name):
                changed = True
        if changed:
            self._reresolve_node()
            self._it = _EMPTY

    # -- public API ----------------------------------------------------------------------
    def next_id(self) -> int:
        unit = (self._source() + self._offset) // self._unit_ns
        if unit == self._unit:
            try:
                return next(self._it)
            except StopIteration:
                pass
        elif unit > self._unit and self._plain_blocks:
            # The first id of a later time unit: the usual call of a generator asked
            # about once per unit (one of a sharded generator's many logical shards).
            # Its block is started here without the general loop below; the promises are
            # the same: under the lock, only forward in time, never past the layout, never
            # in a forked child. Anything else (a clock that went back, a full unit, a
            # lease, a shared sequence) takes the general loop.
            with self._lock:
                if unit > self._unit and unit <= self._max_unit and self._forked_from is None:
                    it = iter(self._block(unit))
                    first = next(it)
                    self._it = it
                    self._unit = unit
                    return first
        with self._lock:
            while True:
                self._sync_block_locked()
                value = next(self._it, None)
                if value is not None:
                    return value
                self._it = iter(self._more(self._unit, 1))
                value = next(self._it, None)
                if value is not None:
                    return value
                self._wait_next_unit_locked()

    def next_ids(self, count: int) -> list[int]:
        """``count`` increasing ids in one lock hold: the fast path for bulk inserts."""
        count = validate.count(count)
        out: list[int] = []
        with self._lock:
            if self._fenced:
                self._check_fence_locked()
            try:
                while True:
                    self._want = count - len(out)
                    self._sync_block_locked()
                    out.extend(islice(self._it, count - len(out)))
                    if len(out) >= count:
                        return out
                    more = self._more(self._unit, count - len(out))
                    if more:
                        self._it = iter(more)
                        continue
                    self._wait_next_unit_locked()
            finally:
                self._want = 1

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
                if self._fenced:
                    self._check_fence_locked()
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

    ``sequence=RedisSequence(url)`` takes the sequence from Redis instead of this
    process, so many processes can share one node id; ``next_ids(n)`` reserves its ids
    in one round trip.
    """

    layout: SnowflakeLayout

    def __init__(
        self,
        layout: SnowflakeLayout,
        *,
        clock: Clock | None = None,
        max_backward_ms: float = 10,
        on_fork: OnFork = "raise",
        sequence: SequenceSource | None = None,
        **fields: NodeValue,
    ) -> None:
        if not isinstance(layout, SnowflakeLayout):
            raise TypeError(f"layout must be a SnowflakeLayout, got {layout!r}")
        if sequence is not None and not isinstance(sequence, SequenceSource):
            raise TypeError(f"sequence must be a sequence source, got {sequence!r}")
        self._sequence = sequence
        self._full_unit = -1
        self._sources = dict(fields)
        self._node = self._resolve_node(layout, claim=False)
        super().__init__(layout, clock=clock, max_backward_ms=max_backward_ms, on_fork=on_fork)

    @property
    def node(self) -> dict[str, int]:
        """The node field values of this generator's ids; reading it claims a leased
        value not claimed yet, as the first id would (``CoordinatorUnavailableError``
        when the coordinator cannot answer)."""
        if self._unclaimed:
            with self._lock:
                if self._unclaimed:
                    self._check_fence_locked()
        return self._node

    def _resolve_node(self, layout: SnowflakeLayout, *, claim: bool = True) -> dict[str, int]:
        """The node values, each range-checked; without ``claim``, leases are only bound
        (no I/O) and their values left out until the first id claims them."""
        node: dict[str, int] = {}
        unclaimed: list[str] = []
        for name, source in self._sources.items():
            bits = layout.field_bits(name)
            if not claim and isinstance(source, Lease):
                source.bind(name, (1 << bits) - 1)
                unclaimed.append(name)
            else:
                node[name] = resolve_node(source, field=name, bits=bits)
        self._unclaimed = tuple(unclaimed)
        # Unclaimed fields are 0 here, never used: a fenced generator checks its leases
        # (and claims) before it makes the block of any time unit.
        self._node_bits = layout.node_bits(node)
        self._span = (layout.max_sequence + 1) << layout.sequence_shift  # one unit's ids
        self._fenced = tuple((name, s) for name, s in self._sources.items() if is_fenced(s))
        self._leased = {name: node[name] for name, _ in self._fenced if name in node}
        self._space = (
            f"{layout.epoch_ms}:{layout.time_shift}:{layout.sequence_shift}:{self._node_bits}"
        )
        return node

    def _reresolve_node(self) -> None:
        self._node = self._resolve_node(self.layout)

    def _refresh_node_after_fork(self) -> bool:
        # One per-process source (a lease) makes the whole node unique per process.
        if any(getattr(s, "per_process", False) for s in self._sources.values()):
            try:
                # A parent that never claimed leaves the claim to the child's first id,
                # as it was left to the parent's: a fork does no I/O for it either.
                self._node = self._resolve_node(self.layout, claim=not self._unclaimed)
            except Exception:
                if not self._fenced:
                    return False
                # The lease claims again before this child's first id, or fences it.
            return True
        # A shared sequence (RedisSequence) keeps processes with one node id apart.
        return self._sequence is not None and self._sequence.shared

    def _block(self, unit: int) -> range:
        layout = self.layout
        start = (unit << layout.time_shift) | self._node_bits
        step = 1 << layout.sequence_shift
        if self._sequence is None:
            return range(start, start + self._span, step)
        limit = layout.max_sequence + 1
        last_ms = layout.epoch_ms + (unit + 1) * layout.time_unit_ms - 1
        seq = self._sequence.reserve(
            self._space, unit, self._want, limit, base=start, last_ms=last_ms
        )
        if not seq or seq.stop >= limit:
            self._full_unit = unit  # no round trip to learn it again
        return range(start + seq.start * step, start + seq.stop * step, step)

    def _more(self, unit: int, want: int) -> range:
        if self._sequence is None or self._full_unit == unit:
            return range(0)
        self._want = want
        return self._block(unit)

    def decompose(self, value: object) -> SnowflakeParts:
        return self.layout.decompose(value)

    def __repr__(self) -> str:
        # Never claims: a repr in a log line or a traceback must not do I/O.
        values: dict[str, object] = {**self._node, **{k: "?" for k in self._unclaimed}}
        node = ", ".join(f"{k}={values[k]}" for k in self._sources if k in values)
        name = self.layout.name or "custom"
        return f"<SnowflakeGenerator {name}{' ' + node if node else ''}>"


class ShardedIdGenerator:
    """Instagram-style ids that carry a logical shard: ``next_id(shard=5)``.

    One sequence per shard, as each of Instagram's shards has its own. By default the
    sequence is per process, so two processes writing one shard issue the same ids:
    give them ``sequence=RedisSequence(url)`` (one sequence per shard and time unit,
    shared by every process), distinct node fields in the layout, or database-side
    generation. Settings checks refuse the unsafe form unless it is declared
    ``"single_process": True``.
    """

    def __init__(
        self,
        layout: SnowflakeLayout,
        *,
        shard_field: str = "shard",
        key_hash: Literal["modulo", "mixed"] | None = None,
        clock: Clock | None = None,
        max_backward_ms: float = 10,
        on_fork: OnFork = "raise",
        sequence: SequenceSource | None = None,
        **fields: NodeValue,
    ) -> None:
        if not isinstance(layout, SnowflakeLayout):
            raise TypeError(f"layout must be a SnowflakeLayout, got {layout!r}")
        if sequence is not None and not isinstance(sequence, SequenceSource):
            raise TypeError(f"sequence must be a sequence source, got {sequence!r}")
        self._sequence = sequence
        if key_hash not in (None, "modulo", "mixed"):
            raise ValueError(f"key_hash must be 'modulo' or 'mixed', got {key_hash!r}")
        # None: not chosen. next_id(shard_key=) then takes Instagram's plain modulo, and
        # model fields (uid_fields.placement) mix keys so small integers spread evenly.
        self.key_hash = key_hash
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
        self._forked_from: int | None = None
        forks.register(self)
        # Validate the epoch and node fields now, not at the first id.
        self._generator(0)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the per-shard generators reset themselves
        # A shard the parent never used gets a new generator in the child, which would
        # not know it was forked: refuse them all unless a lease gives a new node.
        leased = any(getattr(s, "per_process", False) for s in self._fields.values())
        shared = self._sequence is not None and self._sequence.shared
        if self._on_fork == "raise" and not leased and not shared:
            self._forked_from = os.getppid()

    def shard_for_key(self, shard_key: object) -> int:
        """The logical shard of a shard key: ``key % 2**shard_bits``, as Instagram does.

        This is the generator's own ``next_id(shard_key=)``; model fields place rows
        through ``uid_fields.placement``, which mixes keys unless ``key_hash="modulo"``.

        With ``key_hash="mixed"`` the key is first mixed by a stable hash: needed when
        keys are themselves snowflakes, whose low bits (the sequence) are mostly 0 at
        low traffic and would crowd a few logical shards.
        """
        shard_key = validate.integer("shard_key", shard_key)
        if self.key_hash == "mixed":
            shard_key = mix64(shard_key)
        return shard_key % self.logical_shards

    def _shard(self, shard: int | None, shard_key: object) -> int:
        if (shard is None) == (shard_key is None):
            raise TypeError("give exactly one of shard= or shard_key=")
        if shard is None:
            return self.shard_for_key(shard_key)
        return validate.integer("shard", shard, 0, self.logical_shards - 1)

    def _generator(self, shard: int) -> SnowflakeGenerator:
        generator = self._per_shard.get(shard)
        if generator is None:
            if self._forked_from is not None:
                raise ForkedGeneratorError(
                    f"{self!r} was created in process {self._forked_from} and inherited "
                    f"by forked process {os.getpid()}: both would issue the same ids. "
                    "Create generators after the fork, or give them a leased node field."
                )
            with self._lock:
                generator = self._per_shard.get(shard)
                if generator is None:
                    generator = SnowflakeGenerator(
                        self.layout,
                        clock=self._clock,
                        max_backward_ms=self._max_backward_ms,
                        on_fork=self._on_fork,
                        sequence=self._sequence,
                        **{self.shard_field: shard, **self._fields},
                    )
                    self._per_shard[shard] = generator
        return generator

    def next_id(self, shard: int | None = None, *, shard_key: object = None) -> int:
        if shard.__class__ is int and shard_key is None and 0 <= shard < self.logical_shards:
            # A valid shard whose generator exists: the per-row call of keyed writes.
            generator = self._per_shard.get(shard)
            if generator is not None:
                return generator.next_id()
        return self._generator(self._shard(shard, shard_key)).next_id()

    def next_ids(
        self, count: int, shard: int | None = None, *, shard_key: object = None
    ) -> list[int]:
        return self._generator(self._shard(shard, shard_key)).next_ids(count)

    def shard_maker(self) -> Callable[[int], int]:
        """``next_id(shard=...)`` as one bound callable, for a caller that makes an id
        per row from shards it computed (a placement's key placer): a shard whose
        generator exists costs one dict lookup and that generator's ``next_id``; any
        other value (a new shard, a bool, out of range) takes ``next_id`` itself."""
        per_shard = self._per_shard  # only ever added to, never replaced
        slow = self.next_id

        def make(shard: int) -> int:
            generator = per_shard.get(shard) if shard.__class__ is int else None
            return generator.next_id() if generator is not None else slow(shard)

        return make

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
        # A lease is claimed at the first id (see the module doc): until then the server
        # digit is unknown, and no block is made before the fence check claims it.
        self._unclaimed = False
        if isinstance(server, Lease):
            server.bind("server", layout.max_server)
            self._unclaimed = True
            self._server = 0
        else:
            self._server = resolve_node(
                server, field="server", bits=None, maximum=layout.max_server
            )
        if is_fenced(server):
            self._fenced = (("server", server),)
            self._leased = {} if self._unclaimed else {"server": self._server}
        self._random = random.Random()
        super().__init__(layout, clock=clock, max_backward_ms=max_backward_ms, on_fork=on_fork)

    @property
    def server(self) -> int:
        """The server digit of this generator's ids (reading it claims a lease not
        claimed yet, as the first id would)."""
        if self._unclaimed:
            with self._lock:
                if self._unclaimed:
                    self._check_fence_locked()
        return self._server

    @property
    def node(self) -> Mapping[str, int]:
        return {"server": self.server}

    def _refresh_node_after_fork(self) -> bool:
        self._random = random.Random()
        if not getattr(self._server_source, "per_process", False):
            return False
        if self._unclaimed:
            return True  # the child's first id claims, as the parent's would have
        try:
            self._reresolve_node()
        except Exception:
            return bool(self._fenced)  # a lease claims again before the first id, or fences
        return True

    def _reresolve_node(self) -> None:
        self._server = resolve_node(
            self._server_source, field="server", bits=None, maximum=self.layout.max_server
        )
        self._unclaimed = False
        if self._fenced:
            self._leased = {"server": self._server}

    def _block(self, unit: int) -> range:
        layout = self.layout
        # Start in the lower half so every unit still has room for many ids.
        first = self._random.randrange((layout.max_random + 1) // 2 or 1)
        base = unit * layout.time_scale + self._server
        return range(
            base + first * layout.server_scale,
            base + (layout.max_random + 1) * layout.server_scale,
            layout.server_scale,
        )

    def decompose(self, value: object) -> DecimalParts:
        return self.layout.decompose(value)

    def __repr__(self) -> str:
        server = "?" if self._unclaimed else self._server  # never claims (see SnowflakeGenerator)
        return f"<DecimalGenerator {self.layout.name or 'custom'} server={server}>"
