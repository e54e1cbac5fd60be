"""The placement authority: which logical shard, and so which database, every row gets.

Both ORM adapters ask this module and do no placement arithmetic of their own, so one
model declaration puts the same ids on the same databases under Django and SQLAlchemy.
It owns:

- the natural route of a generator (how its ids name a logical shard) and whether a
  shard map's route can read a generator's ids at all;
- normalising a shard key (an int, a digit string, a UUID; a parent row is passed as its
  id) to one integer, with ``ShardKeyError`` for anything else;
- the logical shard a key picks: mixed by a stable hash by default, so small integer keys
  (owners 1..1000) spread over every database instead of filling the first range;
  Instagram's plain ``key % 2**bits`` when the generator asks for ``key_hash="modulo"``;
- co-location: a child keyed by a sharded parent takes the parent's logical shard, scaled
  between the two logical spaces, so splitting a database along logical shards keeps
  every family together;
- the keyless choice (round robin over the databases, a stable spread inside each);
- ids for a batch, one generator call per logical shard;
- the write check: a row goes only to the database its id names, unless a block says
  ``allow_off_shard_writes()``; and the logical shard a database-side function stamps.
"""

from __future__ import annotations

import itertools
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from . import validate
from .errors import ConfigurationError, ShardKeyError, WrongShardError
from .generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from .hashing import mix64
from .layouts import DecimalLayout, IntLayout, SnowflakeLayout
from .locality import LocalityUUIDGenerator
from .shards import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    ByUniqIdDigit,
    Route,
    ShardMap,
)
from .uniqid import UniqIdGenerator

__all__ = [
    "KeyHash",
    "KeyRanges",
    "Placement",
    "allow_off_shard_writes",
    "colocated_logical_shard",
    "logical_shard_in",
    "natural_route",
    "normalize_shard_key",
    "off_shard_writes_allowed",
    "route_fits",
    "route_for",
    "scaled_logical_shard",
    "stamped_logical_shard",
]

KeyHash = Literal["mixed", "modulo"]

_KEY_MIN = -(1 << 63)
_KEY_LIMIT = 1 << 64
# Ids tried before deciding a generator's ids cannot avoid the closed databases.
_OPEN_ATTEMPTS = 1000


IdKind = Literal["snowflake", "sharded", "decimal", "locality", "uniqid"]


def natural_route(
    kind: IdKind,
    layout: IntLayout | None = None,
    *,
    by: str | None = None,
    logical_shards: int = 1024,
    shard_field: str = "shard",
    total_shards: int = 4,
) -> Route:
    """The route ids of a kind and layout take, from their description alone.

    Sharded ids route by their shard field, uniqids by their shard digit, decimal ids
    by their server digits, locality UUIDs by their counter block, snowflakes by the
    mixed modulo; ``by`` names a node field to route on instead (a datacenter, say).
    Settings checks use this without building a generator (which may claim a lease).
    """
    if by is not None:
        if not isinstance(layout, SnowflakeLayout):
            raise ValueError(f"by={by!r} needs a snowflake layout, not a {kind} generator")
        return ByField(layout, by)
    if kind == "uniqid":
        return ByUniqIdDigit(total_shards)
    if kind == "locality":
        return ByLocalityBlock(logical_shards)
    if kind == "sharded":
        if not isinstance(layout, SnowflakeLayout):
            raise ValueError("sharded ids need a snowflake layout")
        return ByField(layout, shard_field)
    if not isinstance(layout, (SnowflakeLayout, DecimalLayout)):
        raise ValueError(f"{kind} ids need an integer layout")
    if isinstance(layout, DecimalLayout) and layout.server_digits:
        return ByDecimalServer(layout)
    return ByModulo(logical_shards, max_value=layout.max_value)


def route_for(generator: object, by: str | None = None, logical_shards: int = 1024) -> Route:
    """The natural route of a generator's ids (see ``natural_route``)."""
    if isinstance(generator, ShardedIdGenerator):
        return natural_route("sharded", generator.layout, by=by, shard_field=generator.shard_field)
    if isinstance(generator, UniqIdGenerator):
        return natural_route("uniqid", by=by, total_shards=generator.total_shards)
    if isinstance(generator, LocalityUUIDGenerator):
        return natural_route("locality", by=by, logical_shards=logical_shards)
    if isinstance(generator, DecimalGenerator):
        return natural_route("decimal", generator.layout, by=by, logical_shards=logical_shards)
    if isinstance(generator, SnowflakeGenerator):
        return natural_route("snowflake", generator.layout, by=by, logical_shards=logical_shards)
    raise TypeError(f"no route for {generator!r}")


def route_fits(route: Route, generator: object) -> str | None:
    """Why ``route`` cannot read the ids of ``generator``, or None when it can.

    A map that reads Instagram's shard bits sends Twitter snowflakes by their worker
    and sequence bits, so a map is only usable for the ids it was made for.
    """
    layout = getattr(generator, "layout", None)
    if isinstance(route, ByField):
        if not isinstance(layout, SnowflakeLayout) or route.field not in layout.field_names:
            return (
                f"it reads the {route.field!r} bits of {route.layout!r}, which {generator!r} lacks"
            )
        ours = (layout.field_shift(route.field), layout.field_bits(route.field))
        theirs = (route.layout.field_shift(route.field), route.layout.field_bits(route.field))
        if ours != theirs:
            return (
                f"it reads the {route.field!r} bits at another position than {generator!r} "
                "writes them"
            )
        return None
    if isinstance(route, ByModulo):
        if isinstance(generator, (LocalityUUIDGenerator, UniqIdGenerator)):
            return f"it takes a modulo of integer ids, and {generator!r} makes no integers"
        return None
    if isinstance(route, ByDecimalServer):
        if not isinstance(generator, DecimalGenerator) or (
            generator.layout.server_scale != route.layout.server_scale
        ):
            return f"it reads the server digits of decimal ids, which {generator!r} lacks"
        return None
    if isinstance(route, ByLocalityBlock):
        if not isinstance(generator, LocalityUUIDGenerator):
            return f"it reads locality UUIDs, which {generator!r} does not make"
        return None
    if isinstance(route, ByUniqIdDigit):
        if not isinstance(generator, UniqIdGenerator) or (
            generator.total_shards != route.logical_shards
        ):
            return f"it reads the shard digit of uniqids over {route.logical_shards} shards"
        return None
    return None  # a route of the user's own: trusted


def normalize_shard_key(value: object, *, name: str = "shard key") -> int:
    """The one integer a shard key stands for.

    Ints, strings of ASCII digits (a key read from a URL or a form) and UUIDs (their 128
    bits) are keys; a parent row is passed by its id. Booleans, floats, empty or
    non-ASCII strings and out-of-range ints raise ``ShardKeyError``, never pick a shard.
    """
    if isinstance(value, bool):
        raise ShardKeyError(f"{name}={value!r} is a bool, not a key")
    if isinstance(value, int):
        if not _KEY_MIN <= value < _KEY_LIMIT:
            raise ShardKeyError(f"{name}={value} is out of the 64-bit range of keys")
        return value
    if isinstance(value, uuid.UUID):
        return value.int
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            number = int(text)
            if number >= _KEY_LIMIT:
                raise ShardKeyError(f"{name}={value!r} is out of the 64-bit range of keys")
            return number
        try:
            return uuid.UUID(text).int
        except ValueError:
            pass
        raise ShardKeyError(f"{name}={value!r} is neither a number nor a UUID")
    raise ShardKeyError(f"{name} must be an int, a digit string or a UUID, not {value!r}")


def logical_shard_in(shard_map: ShardMap, alias: str, key: int) -> int:
    """A logical shard held by ``alias``, picked by a stable hash of ``key``."""
    try:
        low, high = shard_map.ranges[alias]
    except KeyError:
        raise ValueError(
            f"database {alias!r} is not in this shard map ({list(shard_map.databases)})"
        ) from None
    return low + mix64(key) % (high - low)


def scaled_logical_shard(parent_logical: int, theirs: int, ours: int, key: int) -> int:
    """The parent's logical shard scaled from a space of ``theirs`` to one of ``ours``.

    The same number when both count alike (Instagram's children share the parent's
    shard); one of the ``ours // theirs`` shards that correspond to it, picked by ``key``,
    when ours is finer; the one that contains it when ours is coarser; -1 when neither
    divides the other.
    """
    if ours >= theirs and ours % theirs == 0:
        per_parent = ours // theirs
        return parent_logical * per_parent + mix64(key) % per_parent
    if theirs % ours == 0:
        return parent_logical // (theirs // ours)
    return -1


def stamped_logical_shard(shard_map: ShardMap, alias: str) -> int:
    """The logical shard a database-side id function on ``alias`` stamps into its ids.

    The first of the range the database owns: any shard of the range routes back to it,
    and after a split the new owner of that range gets a function of its own.
    """
    try:
        return shard_map.ranges[alias][0]
    except KeyError:
        raise ValueError(
            f"database {alias!r} is not in this shard map ({list(shard_map.databases)})"
        ) from None


def colocated_logical_shard(child: ShardMap, parent: ShardMap, parent_id: object, key: int) -> int:
    """A logical shard of ``child`` for a row that must live with ``parent_id``'s row.

    The parent's logical shard, scaled to the child's logical space, so a later split of
    a database's range along the parent's logical shards keeps children with their
    parents. When explicit ranges disagree, any logical shard on the parent's database.
    """
    parent_logical = parent.logical_shard(parent_id)
    logical = scaled_logical_shard(parent_logical, parent.logical_shards, child.logical_shards, key)
    alias = parent.database(parent_logical)
    if 0 <= logical < child.logical_shards and child.database(logical) == alias:
        return logical
    return logical_shard_in(child, alias, key)


_off_shard_allowed: ContextVar[bool] = ContextVar("uid_off_shard_allowed", default=False)


@contextmanager
def allow_off_shard_writes() -> Iterator[None]:
    """Within the block, writes to a database a row's id does not name are let through.

    For deliberate copies (a staging database, moving rows between maps, a test of one
    database); everywhere else both ORMs refuse them with ``WrongShardError``.
    """
    token = _off_shard_allowed.set(True)
    try:
        yield
    finally:
        _off_shard_allowed.reset(token)


def off_shard_writes_allowed() -> bool:
    return _off_shard_allowed.get()


class Placement:
    """Where the rows of one id field live, and how their ids are made to say so.

    ``generator`` makes the ids (None when a database function makes them); ``shard_map``
    places their logical shards on databases (None while no map is known: ids can still
    be made and read by ``route``, the generator's natural one by default); ``parent`` is
    the placement of the row a shard key points at, when the rows must live with their
    parent. Adapters build one per field and call only this.
    """

    def __init__(
        self,
        generator: Any,
        shard_map: ShardMap | None = None,
        *,
        route: Route | None = None,
        parent: Placement | None = None,
        key_hash: KeyHash | None = None,
        name: str = "id",
        embeds_shard: bool | None = None,
    ) -> None:
        if shard_map is not None and generator is not None:
            problem = route_fits(shard_map.route, generator)
            if problem is not None:
                raise ConfigurationError(
                    f"{name}: the shard map {shard_map!r} cannot route it: {problem}"
                )
        chosen = key_hash or getattr(generator, "key_hash", None) or "mixed"
        if chosen not in ("mixed", "modulo"):
            raise ConfigurationError(
                f"{name}: key_hash must be 'mixed' or 'modulo', not {chosen!r}"
            )
        if shard_map is not None:
            route = shard_map.route
        elif route is None:
            if generator is None:
                raise ConfigurationError(f"{name}: ids made by a database need a route")
            route = route_for(generator)
        self.generator = generator
        self.shard_map = shard_map
        self.route = route
        self.parent = parent
        self.key_hash: KeyHash = chosen
        self.name = name
        self._embeds = (
            isinstance(generator, ShardedIdGenerator) if embeds_shard is None else embeds_shard
        )
        self._keyless = itertools.count(random.randrange(1 << 16))
        self._keyless_lock = threading.Lock()

    # -- reading ids ---------------------------------------------------------------------
    @property
    def embeds_shard(self) -> bool:
        """Whether ids carry a logical shard chosen per row (Instagram's shard bits).

        Also true of ids a database function makes (``generator`` None): each database
        stamps a logical shard it owns.
        """
        return self._embeds

    @property
    def logical_shards(self) -> int:
        return self.route.logical_shards

    def logical_shard_of(self, value: object) -> int:
        """The logical shard an id names (``ValueError``/``TypeError`` for no id)."""
        return self.route.logical_shard(value)

    def database_of(self, value: object) -> str:
        """The database an id lives on."""
        return self._map().database_for(value)

    @property
    def databases(self) -> tuple[str, ...]:
        return self._map().databases

    # -- shard keys ----------------------------------------------------------------------
    def logical_shard_for_key(self, key: object) -> int:
        """The logical shard a shard key (or a parent id) picks for a new row."""
        if self.parent is not None:
            parent_id = key
            number = normalize_shard_key(parent_id, name=self.name)
            if self.shard_map is not None and self.parent.shard_map is not None:
                return colocated_logical_shard(
                    self.shard_map, self.parent.shard_map, parent_id, number
                )
            # No databases known yet: the scaled shard, checked again when placed.
            scaled = scaled_logical_shard(
                self.parent.logical_shard_of(parent_id),
                self.parent.logical_shards,
                self.logical_shards,
                number,
            )
            return scaled if scaled >= 0 else self._hash_key(number)
        number = normalize_shard_key(key, name=self.name)
        return self._open_logical_shard(self._hash_key(number), number)

    def _hash_key(self, number: int) -> int:
        total = self.logical_shards
        if self.key_hash == "mixed":
            return mix64(number) % total
        return number % total

    def _open_logical_shard(self, logical: int, number: int) -> int:
        """``logical``, or, when its database is closed, a logical shard of an open
        database picked by a stable hash of the key (the same one for every row of it)."""
        shard_map = self.shard_map
        if shard_map is None or not shard_map.closed:
            return logical
        if shard_map.database(logical) not in shard_map.closed:
            return logical
        databases = shard_map.open_databases
        return logical_shard_in(shard_map, databases[mix64(number) % len(databases)], number)

    def database_for_key(self, key: object) -> str:
        """The database a shard key (or a parent id) puts a new row on."""
        return self._map().database(self.logical_shard_for_key(key))

    def databases_for_key(self, key: object) -> tuple[str, ...]:
        """Every database rows of a shard key can be on: where new rows go, and, when
        that database was chosen because the key's own is closed, the closed one too
        (rows made before it closed stay there). Queries by key read all of them."""
        new = self.database_for_key(key)
        shard_map = self._map()
        if self.parent is not None or not shard_map.closed:
            return (new,)
        natural = shard_map.database(self._hash_key(normalize_shard_key(key, name=self.name)))
        return (new,) if natural == new else (natural, new)

    def fits_key(self, value: object, key: object) -> bool:
        """Whether an existing id already carries the logical shard ``key`` picks.

        For a child of a parent on another layout, any logical shard on the parent's
        database fits: the id may have been made before a split with another number.
        """
        if not self.embeds_shard:
            return True
        mine = self.logical_shard_of(value)
        if self.parent is not None and self.shard_map is not None:
            if self.parent.shard_map is None:
                return True  # nothing to check against until the parent's map is known
            return self.shard_map.database(mine) == self.database_for_key(key)
        if self.shard_map is not None and self.shard_map.closed:
            # Made before its key's database closed, or after: both are the key's.
            number = normalize_shard_key(key, name=self.name)
            return mine in (self._hash_key(number), self.logical_shard_for_key(key))
        return mine == self.logical_shard_for_key(key)

    # -- making ids ----------------------------------------------------------------------
    def keyless_logical_shard(self) -> int:
        """The logical shard of a new row that has no shard key: round robin over the
        databases (an even spread of rows), a stable spread inside each range."""
        with self._keyless_lock:
            turn = next(self._keyless)
        if self.shard_map is not None:
            databases = self.shard_map.open_databases
            alias = databases[turn % len(databases)]
            return logical_shard_in(self.shard_map, alias, turn)
        return mix64(turn) % self.logical_shards

    def keyless_maker(self) -> Callable[[], Any]:
        """A callable making ids for rows without a shard key: the generator's own
        ``next_id`` where nothing must steer the id (no shard bits to choose, no closed
        database to avoid), else ``new_id``. For adapters that make an id per object."""
        generator = self.generator
        if generator is None:
            raise TypeError(f"ids of {self.name} are made by the database")
        closed = self.shard_map is not None and self.shard_map.closed
        if isinstance(generator, ShardedIdGenerator) or closed:
            return self.new_id
        maker: Callable[[], Any] = generator.next_id
        return maker

    def new_id(self, key: object = None) -> Any:
        """A fresh id: its logical shard from ``key`` when the ids embed one."""
        generator = self.generator
        if generator is None:
            raise TypeError(f"ids of {self.name} are made by the database")
        if not isinstance(generator, ShardedIdGenerator):
            return self._open_only([generator.next_id()], generator.next_id)[0]
        logical = self.keyless_logical_shard() if key is None else self.logical_shard_for_key(key)
        return generator.next_id(shard=logical)

    def _open_only(self, values: list[Any], more: Any) -> list[Any]:
        """``values`` with each id that would land on a closed database replaced by a
        later one that does not (ids whose route is a hash of the id cannot be steered;
        unused ids are simply skipped)."""
        shard_map = self.shard_map
        if shard_map is None or not shard_map.closed:
            return values
        out = []
        for value in values:
            for _ in range(_OPEN_ATTEMPTS):
                if shard_map.database_for(value) not in shard_map.closed:
                    break
                value = more()
            else:
                raise ConfigurationError(
                    f"{self.name}: {_OPEN_ATTEMPTS} ids in a row of {self.generator!r} "
                    f"land on closed databases {sorted(shard_map.closed)}: its ids' route "
                    f"({shard_map.route!r}) does not spread them over the open ones"
                )
            out.append(value)
        return out

    def new_ids(self, count: int, keys: Sequence[object] | None = None) -> list[Any]:
        """``count`` fresh ids, one generator call per logical shard.

        ``keys`` (one per id, None for no key) place the ids of a sharded generator;
        without keys the ids are spread as ``new_id()`` spreads them.
        """
        generator = self.generator
        if generator is None:
            raise TypeError(f"ids of {self.name} are made by the database")
        if keys is not None and len(keys) != count:
            raise ValueError(f"{count} ids need {count} keys, got {len(keys)}")
        if not isinstance(generator, ShardedIdGenerator):
            next_ids = getattr(generator, "next_ids", None)
            if next_ids is None:
                made = [generator.next_id() for _ in range(count)]
            else:
                made = list(next_ids(count))
            return self._open_only(made, generator.next_id)
        logicals = [
            self.keyless_logical_shard()
            if keys is None or keys[i] is None
            else self.logical_shard_for_key(keys[i])
            for i in range(count)
        ]
        positions: dict[int, list[int]] = {}
        for index, logical in enumerate(logicals):
            positions.setdefault(logical, []).append(index)
        out: list[Any] = [None] * count
        for logical, indexes in positions.items():
            for index, value in zip(
                indexes, generator.next_ids(len(indexes), logical), strict=True
            ):
                out[index] = value
        return out

    # -- writes --------------------------------------------------------------------------
    def check_write(self, value: object, database: str, *, what: str = "row") -> None:
        """Refuse to store an id on a database it does not name (``WrongShardError``)."""
        expected = self.database_of(value)
        if expected != database and not off_shard_writes_allowed():
            raise WrongShardError(
                f"this {what}'s id {value} lives on {expected!r}, but the write was sent to "
                f"{database!r}: a row stored off its shard cannot be found by its id",
                database=database,
                expected=expected,
            )

    def _map(self) -> ShardMap:
        if self.shard_map is None:
            raise ConfigurationError(f"{self.name} is not sharded: it has no shard map")
        return self.shard_map

    def __repr__(self) -> str:
        parent = f" with parent {self.parent.name}" if self.parent is not None else ""
        return f"<Placement {self.name} {self.generator!r} {self.shard_map!r}{parent}>"


class KeyRanges:
    """Route rows by an attribute of the application's own: a continent, a region, a tenant.

    Shard keys are numbers (ints, digit strings, UUIDs); a row that must live where its
    ``continent`` says takes, as its shard key, a logical shard from the range this
    helper names for that continent. Build it from the shard map, so that each key's
    range is its database's:

    ``regions = KeyRanges.of_databases(shard_map, {"Asia": "asia", "Europe": "europe"})``

    and declare the id field with ``shard_key="region", key_hash="modulo"`` (the shard key
    *is* the logical shard) and set ``row.region = regions.logical_shard(row.continent)``.
    ``logical_shard(key, within=user_id)`` spreads one key's rows over its whole range,
    so the range can later be split between databases.
    """

    def __init__(
        self, ranges: Mapping[str, tuple[int, int] | range], *, logical_shards: int
    ) -> None:
        self.logical_shards = validate.integer("logical_shards", logical_shards, 1)
        self.ranges: dict[str, tuple[int, int]] = {}
        for key, bounds in ranges.items():
            if not isinstance(key, str) or not key:
                raise ConfigurationError(f"keys must be non-empty strings, got {key!r}")
            low, high = (bounds.start, bounds.stop) if isinstance(bounds, range) else bounds
            if not 0 <= low < high <= self.logical_shards:
                raise ConfigurationError(
                    f"the range of {key!r} must lie within 0..{self.logical_shards} and be "
                    f"non-empty, got {low}..{high}"
                )
            self.ranges[key] = (int(low), int(high))

    @classmethod
    def of_databases(cls, shard_map: ShardMap, databases: Mapping[str, str]) -> KeyRanges:
        """Each key gets the range of logical shards its database owns in ``shard_map``."""
        ranges = {}
        for key, alias in databases.items():
            if alias not in shard_map.ranges:
                raise ConfigurationError(
                    f"key {key!r} names database {alias!r}, which is not in the shard map "
                    f"({list(shard_map.databases)})"
                )
            ranges[key] = shard_map.ranges[alias]
        return cls(ranges, logical_shards=shard_map.logical_shards)

    def logical_shard(self, key: str, within: object = None) -> int:
        """A logical shard of ``key``'s range: its first, or one picked by ``within`` (a
        shard key of its own, e.g. a user id), spread by the stable hash."""
        try:
            low, high = self.ranges[key]
        except (KeyError, TypeError):
            raise ShardKeyError(
                f"{key!r} is not one of the keys this mapping routes ({sorted(self.ranges)})"
            ) from None
        if within is None:
            return low
        return low + mix64(normalize_shard_key(within, name="within")) % (high - low)

    def key_of(self, logical_shard: int) -> list[str]:
        """The keys whose range holds ``logical_shard`` (for reports and audits)."""
        return [k for k, (low, high) in self.ranges.items() if low <= logical_shard < high]

    def __repr__(self) -> str:
        return f"KeyRanges({self.ranges!r}, logical_shards={self.logical_shards})"
