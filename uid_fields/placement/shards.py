"""Shard maps: id -> logical shard -> database alias.

A route reads the logical shard from an id: embedded bits (Instagram's shard field, or
any node field), the leading digit of a uniqid, the counter block of a locality UUID,
or a modulo of the id mixed by a stable integer hash. The mixing matters: at low
traffic a snowflake's sequence is 0 in nearly every id, so a plain ``id % 4`` sends
every row to one shard. Python's ``hash()`` is randomised per process and is never used.

The map from logical shards to databases is separate, so moving a range of logical
shards to a new server changes the map, never the ids. Which route a generator's ids
take, and how new rows pick their logical shard, is decided in ``uid_fields.placement``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .._internal.hashing import mix64
from .._internal.validate import integer, shown
from ..ids import uniqid
from ..ids.layouts import DecimalLayout, SnowflakeLayout, coerce_id
from ..ids.locality import coerce_uuid

__all__ = [
    "MAX_LOGICAL_SHARDS",
    "ByDecimalServer",
    "ByField",
    "ByLocalityBlock",
    "ByModulo",
    "ByUniqIdDigit",
    "Route",
    "ShardMap",
    "mix64",
]

#: The most logical shards a shard map holds: 2**16 = 65536. A map keeps a table of one
#: alias per logical shard (512 KiB at the bound; 10**8 took 1.5 GiB, 4e9 was a
#: MemoryError), so the bound is checked before anything is allocated. It is the widest
#: route the package builds from a preset: Sonyflake's 16-bit ``machine`` field (with
#: ``route_by``); Instagram's 13-bit shard field gives 8192, the modulo and locality
#: routes 1024 by default, uniqids at most 10 and the decimal preset 10. Logical shards
#: are the unit a range moves in: 65536 of them spread a map over thousands of databases.
MAX_LOGICAL_SHARDS = 1 << 16


class Route(Protocol):
    """Reads a logical shard in ``range(logical_shards)`` from an id."""

    logical_shards: int

    def logical_shard(self, value: Any) -> int: ...


class ByField:
    """The value of a field embedded in the id (Instagram's ``shard``, a datacenter...)."""

    def __init__(self, layout: SnowflakeLayout, field: str = "shard") -> None:
        self.layout = layout
        self.field = field
        self.logical_shards = 1 << layout.field_bits(field)

    def logical_shard(self, value: Any) -> int:
        return self.layout.field_of(self.layout.coerce(value), self.field)

    def __repr__(self) -> str:
        return f"ByField({self.field!r}, logical_shards={self.logical_shards})"


class ByModulo:
    """``mix64(id) % logical_shards``: even at one id per ms, unlike ``id % n``."""

    def __init__(self, logical_shards: int = 1024, *, max_value: int = 2**64 - 1) -> None:
        self.logical_shards = integer("logical_shards", logical_shards, 1)
        self.max_value = max_value

    def logical_shard(self, value: Any) -> int:
        return mix64(coerce_id(value, max_value=self.max_value)) % self.logical_shards

    def __repr__(self) -> str:
        return f"ByModulo({self.logical_shards})"


class ByDecimalServer:
    """The server digits of a decimal id."""

    def __init__(self, layout: DecimalLayout) -> None:
        if layout.server_digits == 0:
            raise ValueError("this decimal layout has no server digits to route by")
        self.layout = layout
        self.logical_shards = layout.server_scale

    def logical_shard(self, value: Any) -> int:
        return self.layout.coerce(value) % self.layout.server_scale

    def __repr__(self) -> str:
        return f"ByDecimalServer(logical_shards={self.logical_shards})"


class ByLocalityBlock:
    """The range of the counter block (first 32 bits) a locality UUID falls in.

    Range, not modulo: in variable mode the first hex digit cycles, so ids spread over
    every range; in sequential mode neighbours share a block prefix and stay together.
    """

    def __init__(self, logical_shards: int = 1024) -> None:
        self.logical_shards = integer("logical_shards", logical_shards, 1, 1 << 32)

    def logical_shard(self, value: Any) -> int:
        """The logical shard of a UUID id, read under the core's rule (``coerce_uuid``)."""
        return ((coerce_uuid(value).int >> 96) * self.logical_shards) >> 32

    def __repr__(self) -> str:
        return f"ByLocalityBlock({self.logical_shards})"


class ByUniqIdDigit:
    """The leading shard digit of a shard-prefixed uniqid."""

    def __init__(self, total_shards: int) -> None:
        self.logical_shards = total_shards

    def logical_shard(self, value: Any) -> int:
        return uniqid.shard_of(value, self.logical_shards)

    def __repr__(self) -> str:
        return f"ByUniqIdDigit({self.logical_shards})"


def _spread(databases: Sequence[str], logical_shards: int) -> dict[str, tuple[int, int]]:
    count = len(databases)
    if logical_shards < count:
        raise ValueError(
            f"{count} databases cannot share {logical_shards} logical shards: "
            "some database would get none"
        )
    return {
        alias: (i * logical_shards // count, (i + 1) * logical_shards // count)
        for i, alias in enumerate(databases)
    }


class ShardMap:
    """Routes ids to databases: ``route`` gives the logical shard, ranges give the alias.

    ``ShardMap(["db0", "db1"], route=ByField(INSTAGRAM))`` spreads the logical shards
    evenly in contiguous ranges; ``ranges={"db0": (0, 4096), "db1": (4096, 8192)}``
    places them explicitly (half-open, each logical shard exactly once).

    ``closed=["db0"]`` names databases that take no new keys (a full server): rows
    without a shard key, and shard keys whose logical shard lies there, get ids on the
    open databases instead; rows already there stay readable and writable, and children
    still follow their parent (``uid_fields.placement`` applies this).

    ``incoming=["db2"]`` names databases that own no logical shard yet but are about to
    receive some (``uid_fields.moves``): they get the tables of the map's rows, and no
    row is routed to them until a map with their range is deployed.
    """

    def __init__(
        self,
        databases: Sequence[str] | None = None,
        *,
        route: Route,
        ranges: Mapping[str, tuple[int, int] | range] | None = None,
        closed: Iterable[str] = (),
        incoming: Iterable[str] = (),
    ) -> None:
        self.route = route
        total = route.logical_shards
        if not 1 <= total <= MAX_LOGICAL_SHARDS:  # before the table is allocated
            raise ValueError(
                f"{shown(route)} reads {shown(total)} logical shards; a shard map holds 1 to "
                f"{MAX_LOGICAL_SHARDS} logical shards (route by fewer: logical_shards=, "
                "or a narrower field)"
            )
        if (databases is None) == (ranges is None):
            raise TypeError("give either databases (an even spread) or ranges")
        if databases is not None:
            if isinstance(databases, str) or not databases:
                raise ValueError("databases must be a non-empty list of aliases")
            if len(set(databases)) != len(databases):
                raise ValueError(f"duplicate database aliases in {list(databases)}")
            self.ranges = _spread(list(databases), total)
        else:
            assert ranges is not None
            self.ranges = {
                alias: (r.start, r.stop) if isinstance(r, range) else (int(r[0]), int(r[1]))
                for alias, r in ranges.items()
            }
            _check_cover(self.ranges, total)
        self.databases = tuple(self.ranges)
        if isinstance(closed, str):
            raise TypeError(f"closed must be a list of aliases, got {closed!r}")
        self.closed = frozenset(closed)
        unknown = sorted(self.closed - set(self.databases))
        if unknown:
            raise ValueError(f"closed names databases not in the map: {unknown}")
        if isinstance(incoming, str):
            raise TypeError(f"incoming must be a list of aliases, got {incoming!r}")
        self.incoming = tuple(d for d in dict.fromkeys(incoming) if d not in self.ranges)
        #: Every database that holds the map's tables: the owners, then the incoming ones.
        self.migrated_databases = (*self.databases, *self.incoming)
        self.open_databases = tuple(d for d in self.databases if d not in self.closed)
        if not self.open_databases:
            raise ValueError("every database is closed: new rows would have nowhere to go")
        self._table = [""] * total
        for alias, (low, high) in self.ranges.items():
            self._table[low:high] = [alias] * (high - low)
        #: The alias of each logical shard, by number (``database(n)`` without its check).
        self.table: tuple[str, ...] = tuple(self._table)

    @property
    def logical_shards(self) -> int:
        return self.route.logical_shards

    def database(self, logical_shard: int) -> str:
        """The alias holding a logical shard."""
        if not 0 <= logical_shard < len(self._table):
            raise ValueError(
                f"logical shard {logical_shard} is out of range 0..{len(self._table) - 1}"
            )
        return self._table[logical_shard]

    def logical_shard(self, value: Any) -> int:
        return self.route.logical_shard(value)

    def database_for(self, value: Any) -> str:
        """The alias of the database an id lives on."""
        return self._table[self.route.logical_shard(value)]

    def group(self, values: Iterable[Any]) -> dict[str, list[Any]]:
        """Ids grouped by database, each group in input order."""
        groups: dict[str, list[Any]] = {}
        for value in values:
            groups.setdefault(self.database_for(value), []).append(value)
        return groups

    def __repr__(self) -> str:
        spans = ", ".join(f"{a}: {lo}..{hi - 1}" for a, (lo, hi) in self.ranges.items())
        closed = f" closed={sorted(self.closed)}" if self.closed else ""
        incoming = f" incoming={list(self.incoming)}" if self.incoming else ""
        return f"<ShardMap {self.route!r} {{{spans}}}{closed}{incoming}>"


def _check_cover(ranges: Mapping[str, tuple[int, int]], total: int) -> None:
    owner: list[str | None] = [None] * total
    for alias, (low, high) in ranges.items():
        if not 0 <= low < high <= total:
            raise ValueError(
                f"range {low}..{high} of {alias!r} is empty or outside 0..{total} "
                "(half-open: (start, stop))"
            )
        for logical in range(low, high):
            if owner[logical] is not None:
                raise ValueError(
                    f"logical shard {logical} is mapped twice: to {owner[logical]!r} and {alias!r}"
                )
            owner[logical] = alias
    missing = [i for i, alias in enumerate(owner) if alias is None]
    if missing:
        raise ValueError(f"{len(missing)} logical shard(s) map to no database, first {missing[:5]}")
