"""Integer id layouts: pure functions of ints. No clock, no I/O.

A layout knows where every part of an id lives and which ids exist at an instant
(``min_id``/``max_id``), which is all that routing and time-range queries need.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, Self

from .._internal.timeutil import (
    check_epoch_ms,
    datetime_from_ms,
    describe_ms,
    format_ms,
    ms_from_datetime,
)
from .._internal.validate import integer, shown
from ..errors import LayoutExhaustedError

__all__ = [
    "DECIMAL",
    "DECIMAL_SQL",
    "DISCORD",
    "INSTAGRAM",
    "PHP_REDIS",
    "PRESETS",
    "SONYFLAKE",
    "TWITTER",
    "DecimalLayout",
    "DecimalParts",
    "IntLayout",
    "SnowflakeLayout",
    "SnowflakeParts",
]

SIGNED_MAX = 2**63 - 1
UNSIGNED_MAX = 2**64 - 1
#: The longest time unit a layout takes: a day. Ids are ordered by time and time-range
#: queries read bounds from them, which a coarser unit could not tell apart (the presets
#: use 1, 10 and 1000 ms); it also keeps the unit's arithmetic within datetimes.
MAX_TIME_UNIT_MS = 86_400_000
_RESERVED = frozenset(
    {"timestamp_ms", "datetime", "sequence", "value", "fields", "layout", "time", "random"}
)


def coerce_id(value: object, *, max_value: int) -> int:
    """An id as a non-negative int, from an int or from its text.

    Text is an id under one rule, for every adapter and entry point (``get()``, lookups,
    URL converters, forms after their own stripping, assignments): 1 to 20 ASCII
    decimal digits and nothing else. No sign, no spaces or newlines, no ``_`` (all of
    which ``int()`` takes), no other script's digits; leading zeros are allowed, since a
    decimal id's 20-digit form has them. Anything else is a ValueError (TypeError for
    non-id types), so malformed ids from URLs and forms never reach the bit arithmetic.
    """
    if isinstance(value, bool):
        raise TypeError("a bool is not an id")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        if len(value) > 20:  # before int(): no 64-bit id has more digits
            raise ValueError(f"{value[:24]!r}... is not an id: more than 20 digits")
        if not value.isascii() or not value.isdigit():
            raise ValueError(f"{value!r} is not an id: expected 1 to 20 decimal digits")
        number = int(value)
    else:
        raise TypeError(f"expected an int id or a string of digits, got {type(value).__name__}")
    if not 0 <= number <= max_value:
        raise ValueError(f"id {number} is out of range 0..{max_value}")
    return number


class IntLayout:
    """What every integer layout shares: epoch, time unit, lifetime, range bounds."""

    epoch_ms: int
    time_unit_ms: int
    unsigned: bool
    name: str | None
    max_value: int
    max_unit: int

    def _init_time(self, epoch_ms: int, time_unit_ms: int, unsigned: bool) -> None:
        self.epoch_ms = check_epoch_ms("epoch_ms", epoch_ms)  # 1970..9999: formattable
        self.time_unit_ms = integer("time_unit_ms", time_unit_ms, 1, MAX_TIME_UNIT_MS)
        self.unsigned = bool(unsigned)
        self.max_value = UNSIGNED_MAX if unsigned else SIGNED_MAX

    # -- time <-> units ------------------------------------------------------------------
    @property
    def epoch(self) -> datetime:
        return datetime_from_ms(self.epoch_ms)

    @property
    def exhausted_at(self) -> datetime:
        """The first instant whose ids no longer fit (signed 63 bits unless ``unsigned``)."""
        try:
            return datetime_from_ms(self.epoch_ms + (self.max_unit + 1) * self.time_unit_ms)
        except ValueError:  # lasts past the year 9999 (41 bits of seconds, say)
            return datetime.max.replace(tzinfo=UTC)

    def unit_of(self, timestamp_ms: int) -> int:
        """Time units since the epoch; range-checked."""
        if timestamp_ms < self.epoch_ms:
            raise ValueError(
                f"timestamp {format_ms(timestamp_ms)} is before the layout's epoch "
                f"{format_ms(self.epoch_ms)}"
            )
        unit = (timestamp_ms - self.epoch_ms) // self.time_unit_ms
        if unit > self.max_unit:
            raise LayoutExhaustedError(
                f"timestamp {format_ms(timestamp_ms)} is past this layout's lifetime: ids "
                f"stop fitting at {self.exhausted_at.isoformat()} (max id {self.max_value})"
            )
        return unit

    def timestamp_ms_of_unit(self, unit: int) -> int:
        return self.epoch_ms + unit * self.time_unit_ms

    # -- bounds for range queries --------------------------------------------------------
    def _unit_bounds(self, unit: int) -> tuple[int, int]:
        raise NotImplementedError

    def min_id(self, at: datetime | int, *, clamp: bool = False) -> int:
        """The smallest id of the time unit containing ``at`` (aware datetime or Unix ms).

        With ``clamp``, instants before the epoch give 0 and instants past the lifetime
        give ``max_value + 1``, so ``id >= min_id(t)`` stays exact for any ``t``.
        """
        ms = ms_from_datetime(at)
        if clamp:
            if ms < self.epoch_ms:
                return 0
            if (ms - self.epoch_ms) // self.time_unit_ms > self.max_unit:
                return self.max_value + 1
        return self._unit_bounds(self.unit_of(ms))[0]

    def max_id(self, at: datetime | int, *, clamp: bool = False) -> int:
        """The largest id of the time unit containing ``at``.

        With ``clamp``, instants before the epoch give -1 and instants past the lifetime
        give ``max_value``, so ``id <= max_id(t)`` stays exact for any ``t``.
        """
        ms = ms_from_datetime(at)
        if clamp:
            if ms < self.epoch_ms:
                return -1
            if (ms - self.epoch_ms) // self.time_unit_ms > self.max_unit:
                return self.max_value
        return self._unit_bounds(self.unit_of(ms))[1]

    def time_condition(self, op: str, at: datetime | int) -> tuple[str, int] | bool:
        """The condition on ids equivalent to "creation time ``op`` ``at``".

        ``op`` is one of ``>=``, ``>``, ``<=``, ``<``, compared at the layout's time unit.
        The answer is ``(op, bound)`` for ``id op bound``, or ``True``/``False`` when
        every id / no id qualifies (an instant outside the lifetime), so no adapter ever
        writes an out-of-range integer into SQL.
        """
        if op in (">=", "<"):
            low = self.min_id(at, clamp=True)
            if low <= 0:
                return op == ">="
            if low > self.max_value:
                return op == "<"
            return op, low
        if op in (">", "<="):
            high = self.max_id(at, clamp=True)
            if high < 0:
                return op == ">"
            if high >= self.max_value:
                return op == "<="
            return op, high
        raise ValueError(f"op must be one of >=, >, <=, <; got {op!r}")

    def coerce(self, value: object) -> int:
        """``value`` as an id of this layout, or ValueError/TypeError."""
        return coerce_id(value, max_value=self.max_value)

    def timestamp_ms_of(self, value: object) -> int:
        raise NotImplementedError

    def decompose(self, value: object) -> Parts:
        raise NotImplementedError

    def diagram(self) -> str:
        raise NotImplementedError

    # -- value semantics: a layout is its constructor parameters -------------------------
    def _params(self) -> dict[str, Any]:
        raise NotImplementedError

    def replace(self, **changes: Any) -> Self:
        """The same layout with some parameters changed (epoch_ms, fields, ...)."""
        params = self._params()
        unknown = set(changes) - set(params)
        if unknown:
            raise TypeError(f"replace() got unknown parameter(s) {sorted(unknown)}")
        return type(self)(**(params | changes))

    def _key(self) -> tuple[Any, ...]:
        return tuple(v for k, v in self._params().items() if k != "name")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, IntLayout)
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))


class Parts(Protocol):
    """What every decoded id offers."""

    timestamp_ms: int

    @property
    def datetime(self) -> datetime: ...

    def as_dict(self) -> dict[str, Any]: ...


class _IntParts:
    """A decoded integer id: equal to another when the id and its layout are."""

    __slots__ = ("layout", "timestamp_ms", "value")
    value: int
    timestamp_ms: int
    layout: IntLayout

    @property
    def datetime(self) -> datetime:
        return datetime_from_ms(self.timestamp_ms)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _IntParts)
        return (self.value, self.layout) == (other.value, other.layout)

    def __hash__(self) -> int:
        return hash((self.value, self.layout))


class SnowflakeParts(_IntParts):
    """A decoded snowflake: time, sequence and one attribute per node field."""

    __slots__ = ("fields", "sequence")

    def __init__(
        self,
        value: int,
        timestamp_ms: int,
        sequence: int,
        fields: dict[str, int],
        layout: SnowflakeLayout,
    ) -> None:
        self.value = value
        self.timestamp_ms = timestamp_ms
        self.sequence = sequence
        self.fields = fields
        self.layout = layout

    def __getattr__(self, name: str) -> int:
        if name.startswith("__") or name == "fields":
            # Asked before the slots are set (copy, pickle): never recurse into fields.
            raise AttributeError(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(name) from None

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            SnowflakeParts,
            (self.value, self.timestamp_ms, self.sequence, dict(self.fields), self.layout),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.value,
            "timestamp_ms": self.timestamp_ms,
            "datetime": describe_ms(self.timestamp_ms),
            **self.fields,
            "sequence": self.sequence,
        }

    def __repr__(self) -> str:
        fields = "".join(f", {k}={v}" for k, v in self.fields.items())
        return (
            f"SnowflakeParts(id={self.value}, datetime={describe_ms(self.timestamp_ms)}"
            f"{fields}, sequence={self.sequence})"
        )


def _check_fields(fields: Iterable[tuple[str, int]], kind: str) -> tuple[tuple[str, int], ...]:
    checked = []
    for item in fields:
        try:
            name, bits = item
        except (TypeError, ValueError):
            raise TypeError(f"{kind} must be (name, bits) pairs, got {shown(item)}") from None
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"field name {shown(name)} is not a valid identifier")
        if name in _RESERVED or name.startswith("_"):
            raise ValueError(f"field name {name!r} is reserved")
        checked.append((name, integer(f"bits of field {name!r}", bits, 1, 63)))
    return tuple(checked)


class SnowflakeLayout(IntLayout):
    """A bit layout, most significant first: time · fields · sequence · low_fields.

    ``low_fields`` sit below the sequence, as Sonyflake's machine id does.
    """

    def __init__(
        self,
        *,
        epoch_ms: int,
        fields: Iterable[tuple[str, int]] = (),
        time_bits: int = 41,
        sequence_bits: int = 12,
        time_unit_ms: int = 1,
        low_fields: Iterable[tuple[str, int]] = (),
        unsigned: bool = False,
        name: str | None = None,
    ) -> None:
        self._init_time(epoch_ms, time_unit_ms, unsigned)
        self.name = name
        self.time_bits = integer("time_bits", time_bits, 1, 64)
        self.sequence_bits = integer("sequence_bits", sequence_bits, 0, 63)
        self.fields = _check_fields(fields, "fields")
        self.low_fields = _check_fields(low_fields, "low_fields")
        names = [n for n, _ in self.fields + self.low_fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {names}")
        self.total_bits = (
            self.time_bits
            + self.sequence_bits
            + sum(b for _, b in self.fields)
            + sum(b for _, b in self.low_fields)
        )
        if self.total_bits > 64:
            raise ValueError(
                f"layout needs {self.total_bits} bits; at most 64 fit a 64-bit integer"
            )
        # Bit positions, from the least significant end.
        shift = 0
        positions: dict[str, tuple[int, int]] = {}
        for field_name, bits in reversed(self.low_fields):
            positions[field_name] = (shift, bits)
            shift += bits
        self.sequence_shift = shift
        shift += self.sequence_bits
        for field_name, bits in reversed(self.fields):
            positions[field_name] = (shift, bits)
            shift += bits
        self.time_shift = shift
        self._positions = {n: positions[n] for n in names}  # declaration order
        self.max_sequence = (1 << self.sequence_bits) - 1
        self.max_unit = min(
            (1 << self.time_bits) - 1, ((self.max_value + 1) >> self.time_shift) - 1
        )
        if self.max_unit < 0:
            raise ValueError("no time unit fits: the layout leaves no room below the sign bit")

    # -- introspection -------------------------------------------------------------------
    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(self._positions)

    def field_bits(self, name: str) -> int:
        return self._position(name)[1]

    def field_shift(self, name: str) -> int:
        return self._position(name)[0]

    def _position(self, name: str) -> tuple[int, int]:
        try:
            return self._positions[name]
        except KeyError:
            raise ValueError(
                f"layout has no field {name!r}; its fields are {list(self._positions)}"
            ) from None

    @property
    def ids_per_ms(self) -> float:
        return (self.max_sequence + 1) / self.time_unit_ms

    # -- compose / decompose -------------------------------------------------------------
    def node_bits(self, values: Mapping[str, int]) -> int:
        """The node fields' values in place; missing fields are 0, unknown ones refused."""
        unknown = set(values) - set(self._positions)
        if unknown:
            raise ValueError(
                f"unknown field(s) {sorted(unknown)}; this layout has {list(self._positions)}"
            )
        bits = 0
        for field_name, (shift, width) in self._positions.items():
            value = integer(field_name, values.get(field_name, 0), 0, (1 << width) - 1)
            bits |= value << shift
        return bits

    def compose_unit(self, unit: int, sequence: int, node_bits: int) -> int:
        return (unit << self.time_shift) | (sequence << self.sequence_shift) | node_bits

    def compose(self, *, timestamp_ms: int, sequence: int = 0, **fields: int) -> int:
        """The id of ``timestamp_ms`` (Unix ms), ``sequence`` and node field values."""
        unit = self.unit_of(integer("timestamp_ms", timestamp_ms, 0))
        sequence = integer("sequence", sequence, 0, self.max_sequence)
        return self.compose_unit(unit, sequence, self.node_bits(fields))

    def decompose(self, value: object) -> SnowflakeParts:
        number = coerce_id(value, max_value=self.max_value)
        if number >> self.total_bits:
            raise ValueError(f"id {number} does not fit this {self.total_bits}-bit layout")
        unit = number >> self.time_shift
        fields = {
            name: (number >> shift) & ((1 << width) - 1)
            for name, (shift, width) in self._positions.items()
        }
        sequence = (number >> self.sequence_shift) & self.max_sequence
        return SnowflakeParts(number, self.timestamp_ms_of_unit(unit), sequence, fields, self)

    def field_of(self, value: int, name: str) -> int:
        """One field of an id, without building a parts object (the routing hot path)."""
        shift, width = self._position(name)
        return (value >> shift) & ((1 << width) - 1)

    def timestamp_ms_of(self, value: object) -> int:
        number = coerce_id(value, max_value=self.max_value)
        return self.timestamp_ms_of_unit(number >> self.time_shift)

    def _unit_bounds(self, unit: int) -> tuple[int, int]:
        low = unit << self.time_shift
        return low, low | ((1 << self.time_shift) - 1)

    def _params(self) -> dict[str, Any]:
        return {
            "epoch_ms": self.epoch_ms,
            "fields": self.fields,
            "time_bits": self.time_bits,
            "sequence_bits": self.sequence_bits,
            "time_unit_ms": self.time_unit_ms,
            "low_fields": self.low_fields,
            "unsigned": self.unsigned,
            "name": self.name,
        }

    def __repr__(self) -> str:
        parts = [f"epoch_ms={self.epoch_ms}", f"time_bits={self.time_bits}"]
        if self.fields:
            parts.append(f"fields={self.fields!r}")
        parts.append(f"sequence_bits={self.sequence_bits}")
        if self.low_fields:
            parts.append(f"low_fields={self.low_fields!r}")
        if self.time_unit_ms != 1:
            parts.append(f"time_unit_ms={self.time_unit_ms}")
        if self.unsigned:
            parts.append("unsigned=True")
        label = f"{self.name}: " if self.name else ""
        return f"<SnowflakeLayout {label}{', '.join(parts)} (epoch {format_ms(self.epoch_ms)})>"

    def diagram(self) -> str:
        """A one-line bit diagram, most significant first."""
        cells = []
        if self.total_bits < 64:
            cells.append(f"{64 - self.total_bits} unused")
        unit = "ms" if self.time_unit_ms == 1 else f"x{self.time_unit_ms} ms"
        cells.append(f"{self.time_bits} time ({unit})")
        cells += [f"{b} {n}" for n, b in self.fields]
        cells.append(f"{self.sequence_bits} sequence")
        cells += [f"{b} {n}" for n, b in self.low_fields]
        return " | ".join(cells)


class DecimalParts(_IntParts):
    """A decoded decimal id: time, random digits, server digits."""

    __slots__ = ("random", "server")

    def __init__(
        self, value: int, timestamp_ms: int, random: int, server: int, layout: DecimalLayout
    ) -> None:
        self.value = value
        self.timestamp_ms = timestamp_ms
        self.random = random
        self.server = server
        self.layout = layout

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.value,
            "timestamp_ms": self.timestamp_ms,
            "datetime": describe_ms(self.timestamp_ms),
            "random": self.random,
            "server": self.server,
        }

    def __repr__(self) -> str:
        return (
            f"DecimalParts(id={self.value}, datetime={describe_ms(self.timestamp_ms)}, "
            f"random={self.random}, server={self.server})"
        )


class DecimalLayout(IntLayout):
    """Decimal digits, not bits: ``time * 10**(r+s) + random * 10**s + server``.

    The MySQL BIGINT UID post's layout: 13 digits of ms, 6 random, 1 server digit; its
    SQL variant uses seconds (``time_unit_ms=1000``) and 9 random digits, no server.
    """

    def __init__(
        self,
        *,
        epoch_ms: int,
        time_digits: int = 13,
        random_digits: int = 6,
        server_digits: int = 1,
        time_unit_ms: int = 1,
        unsigned: bool = False,
        name: str | None = None,
    ) -> None:
        self._init_time(epoch_ms, time_unit_ms, unsigned)
        self.name = name
        self.time_digits = integer("time_digits", time_digits, 1, 20)
        self.random_digits = integer("random_digits", random_digits, 0, 19)
        self.server_digits = integer("server_digits", server_digits, 0, 19)
        self.total_digits = self.time_digits + self.random_digits + self.server_digits
        self.server_scale: int = 10**self.server_digits
        self.time_scale: int = 10 ** (self.random_digits + self.server_digits)
        self.max_random: int = 10**self.random_digits - 1
        self.max_server = self.server_scale - 1
        self.max_unit = min(10**self.time_digits - 1, (self.max_value + 1) // self.time_scale - 1)
        if self.max_unit < 0:
            raise ValueError(
                f"{self.total_digits} digits leave no time unit below {self.max_value}"
            )

    def compose_unit(self, unit: int, random: int, server: int) -> int:
        return unit * self.time_scale + random * self.server_scale + server

    def compose(self, *, timestamp_ms: int, random: int = 0, server: int = 0) -> int:
        unit = self.unit_of(integer("timestamp_ms", timestamp_ms, 0))
        random = integer("random", random, 0, self.max_random)
        server = integer("server", server, 0, self.max_server)
        return self.compose_unit(unit, random, server)

    def decompose(self, value: object) -> DecimalParts:
        number = coerce_id(value, max_value=self.max_value)
        unit, rest = divmod(number, self.time_scale)
        if unit > self.max_unit:
            raise ValueError(f"id {number} does not fit this {self.total_digits}-digit layout")
        random, server = divmod(rest, self.server_scale)
        return DecimalParts(number, self.timestamp_ms_of_unit(unit), random, server, self)

    def timestamp_ms_of(self, value: object) -> int:
        number = coerce_id(value, max_value=self.max_value)
        return self.timestamp_ms_of_unit(number // self.time_scale)

    def _unit_bounds(self, unit: int) -> tuple[int, int]:
        low = unit * self.time_scale
        return low, low + self.time_scale - 1

    def _params(self) -> dict[str, Any]:
        return {
            "epoch_ms": self.epoch_ms,
            "time_digits": self.time_digits,
            "random_digits": self.random_digits,
            "server_digits": self.server_digits,
            "time_unit_ms": self.time_unit_ms,
            "unsigned": self.unsigned,
            "name": self.name,
        }

    def __repr__(self) -> str:
        label = f"{self.name}: " if self.name else ""
        unit = "" if self.time_unit_ms == 1 else f", time_unit_ms={self.time_unit_ms}"
        signed = ", unsigned=True" if self.unsigned else ""
        return (
            f"<DecimalLayout {label}epoch_ms={self.epoch_ms}, time_digits={self.time_digits}, "
            f"random_digits={self.random_digits}, server_digits={self.server_digits}"
            f"{unit}{signed} (epoch {format_ms(self.epoch_ms)})>"
        )

    def diagram(self) -> str:
        unit = "ms" if self.time_unit_ms == 1 else f"x{self.time_unit_ms} ms"
        return (
            f"{self.time_digits} digits time ({unit}) | {self.random_digits} digits random"
            f" | {self.server_digits} digits server"
        )


#: Twitter's 2010 snowflake: 41 bits of ms since 2010-11-04T01:42:54.657Z.
TWITTER = SnowflakeLayout(
    epoch_ms=1288834974657, fields=(("datacenter", 5), ("worker", 5)), name="twitter"
)
#: Instagram's next_id(): 41 ms · 13 logical shard · 10 sequence (all 64 bits).
INSTAGRAM = SnowflakeLayout(
    epoch_ms=1314220021721, fields=(("shard", 13),), sequence_bits=10, name="instagram"
)
#: Sony's Sonyflake v1: 39 bits of 10 ms since 2014-09-01, 8 sequence, 16 machine (low).
SONYFLAKE = SnowflakeLayout(
    epoch_ms=1409529600000,
    time_bits=39,
    sequence_bits=8,
    time_unit_ms=10,
    low_fields=(("machine", 16),),
    name="sonyflake",
)
#: Discord: 42 bits of ms since 2015-01-01, 5 worker, 5 process, 12 increment.
DISCORD = SnowflakeLayout(
    epoch_ms=1420070400000,
    time_bits=42,
    fields=(("worker", 5), ("process", 5)),
    name="discord",
)
#: The PHP+Redis generator: Twitter's split with 5 server + 5 worker (business) bits.
PHP_REDIS = SnowflakeLayout(
    epoch_ms=1556985600000, fields=(("server", 5), ("worker", 5)), name="php_redis"
)
#: The MySQL BIGINT UID post: 13 digits of ms, 6 random, 1 server digit.
DECIMAL = DecimalLayout(epoch_ms=1704067200000, name="decimal")
#: The same post's SQL variant: seconds and 9 random digits.
DECIMAL_SQL = DecimalLayout(
    epoch_ms=1704067200000,
    time_digits=10,
    random_digits=9,
    server_digits=0,
    time_unit_ms=1000,
    name="decimal_sql",
)

#: Every preset by name (settings and the command line refer to them this way).
PRESETS: dict[str, IntLayout] = {
    layout.name: layout
    for layout in (TWITTER, INSTAGRAM, SONYFLAKE, DISCORD, PHP_REDIS, DECIMAL, DECIMAL_SQL)
    if layout.name is not None
}
