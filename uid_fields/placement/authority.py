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

Logged on ``uid_fields.placement`` (docs/logging.md): the first new row of a key whose
database is closed (INFO, once per closed database): from then on its keys' new rows go
to the open databases.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from .._internal.hashing import mix64
from ..errors import ConfigurationError, WrongShardError
from ..ids.generators import ShardedIdGenerator
from .keys import (
    KEY_LIMIT,
    KEY_MIN,
    colocated_logical_shard,
    logical_shard_in,
    normalize_shard_key,
    scaled_logical_shard,
)
from .routes import route_fits, route_for
from .shards import (
    ByField,
    Route,
    ShardMap,
)

__all__ = [
    "KeyHash",
    "Placement",
    "allow_off_shard_writes",
    "off_shard_writes_allowed",
]

KeyHash = Literal["mixed", "modulo"]

log = logging.getLogger("uid_fields.placement")

# Ids tried before deciding a generator's ids cannot avoid the closed databases.
_OPEN_ATTEMPTS = 1000


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
    parent. ``name`` names the id field in errors, ``key_name`` its shard key (the key
    column, ``photos.owner_id``). Adapters build one per field and call only this.
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
        key_name: str | None = None,
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
        #: What errors about a shard key call it: the key column (``photos.owner_id``),
        #: never the id it places.
        self.key_name = key_name if key_name is not None else f"the shard key of {name}"
        self._embeds = (
            isinstance(generator, ShardedIdGenerator) if embeds_shard is None else embeds_shard
        )
        self._keyless = itertools.count(random.randrange(1 << 16))
        self._keyless_lock = threading.Lock()
        self._steered_off: set[str] = set()  # closed databases whose keys were steered
        self._places_as: dict[Placement, bool] = {}  # places_keys_as, per other placement
        self._placer: Callable[[object], tuple[Any, str | None]] | None = None

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
            number = normalize_shard_key(parent_id, name=self.key_name)
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
        number = normalize_shard_key(key, name=self.key_name)
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
        closed = shard_map.database(logical)
        if closed not in shard_map.closed:
            return logical
        databases = shard_map.open_databases
        if closed not in self._steered_off:
            self._steered_off.add(closed)
            log.info(
                "%s: a key of closed database %s: its new rows go to the open databases "
                "(%s), picked per key; its existing rows stay and are read there too",
                self.name,
                closed,
                ", ".join(databases),
            )
        return logical_shard_in(shard_map, databases[mix64(number) % len(databases)], number)

    def places_keys_as(self, other: Placement) -> bool:
        """Whether every shard key gets the same logical shard here as in ``other``: the
        same generator, route and key hash, no parent, and no closed database here to
        steer keys off (a placement with no map, or another map, otherwise agrees). An
        id ``other`` made for a key then fits that key here without placing it again."""
        if self is other:
            return True
        known = self._places_as.get(other)
        if known is None:
            known = self._places_as[other] = self._compare_key_placement(other)
        return known

    def _compare_key_placement(self, other: Placement) -> bool:
        closed = any(p.shard_map is not None and p.shard_map.closed for p in (self, other))
        return (
            not closed
            and self.parent is None
            and other.parent is None
            and self.generator is other.generator
            and _same_route(self.route, other.route)
            and self.key_hash == other.key_hash
            and self._embeds == other._embeds
        )

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
        natural = shard_map.database(self._hash_key(normalize_shard_key(key, name=self.key_name)))
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
            number = normalize_shard_key(key, name=self.key_name)
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

    def new_id_on(self, database: str, key: object = None) -> Any:
        """A fresh id whose row lives on ``database``: for an insert that runs there and
        nowhere else (a data migration run on each shard in turn).

        With a key, the key decides (``new_id``): a key whose rows live elsewhere gets an
        id of its own database, and the write check refuses the row here. Without one,
        ids that carry a logical shard get one of ``database``'s, spread over its range
        as keyless rows are; ids routed by a hash of the id are drawn until one names
        ``database`` (the others are skipped, as ``new_id`` skips ids of closed
        databases). The database is always ``database``: never one picked at random.
        """
        if key is not None:
            return self.new_id(key)
        generator = self.generator
        if generator is None:
            raise TypeError(f"ids of {self.name} are made by the database")
        shard_map = self._map()
        if isinstance(generator, ShardedIdGenerator):
            with self._keyless_lock:
                turn = next(self._keyless)
            return generator.next_id(shard=logical_shard_in(shard_map, database, turn))
        if database not in shard_map.ranges:
            raise ValueError(f"database {database!r} is not in {shard_map!r}")
        for _ in range(_OPEN_ATTEMPTS):
            value = generator.next_id()
            if shard_map.database_for(value) == database:
                return value
        raise ConfigurationError(
            f"{self.name}: {_OPEN_ATTEMPTS} ids in a row of {self.generator!r} name other "
            f"databases than {database!r}: its ids' route ({shard_map.route!r}) does not "
            "reach that database; give the rows ids made for it"
        )

    def new_placed_id(self, key: object = None) -> tuple[Any, str | None]:
        """``new_id(key)`` and the database the id names (None without a shard map),
        with the key placed once: an adapter that records both need not place the row
        again when it routes and groups it."""
        generator = self.generator
        if not isinstance(generator, ShardedIdGenerator) or key is None:
            value = self.new_id(key)
            return value, None if self.shard_map is None else self.shard_map.database_for(value)
        logical = self.logical_shard_for_key(key)
        value = generator.next_id(shard=logical)
        return value, None if self.shard_map is None else self.shard_map.database(logical)

    def key_placer(self) -> Callable[[object], tuple[Any, str | None]]:
        """A callable doing what ``new_placed_id(key)`` does for a key, built once.

        For adapters that make an id for every object built (an ORM's construction
        hook): in the usual case (a sharded generator, no parent, no closed database)
        the key's hash, the generator of its logical shard and the database of that
        shard are bound once here instead of looked up per row. Any other case, and any
        key that is not a plain in-range int (strings, UUIDs, errors), goes through
        ``new_placed_id`` itself, so the answers are the same by construction.
        """
        placer = self._placer
        if placer is not None:
            return placer
        generator = self.generator
        shard_map = self.shard_map
        if (
            not isinstance(generator, ShardedIdGenerator)
            or self.parent is not None
            or (shard_map is not None and shard_map.closed)
        ):
            placer = self.new_placed_id
        else:
            placer = _fast_key_placer(self, generator, shard_map)
        self._placer = placer
        return placer

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


def _same_route(a: Route, b: Route) -> bool:
    """Whether two routes read the same logical shard from every id."""
    if a is b:
        return True
    if isinstance(a, ByField) and isinstance(b, ByField):
        return a.field == b.field and a.layout == b.layout
    return False


def _fast_key_placer(
    placement: Placement, generator: ShardedIdGenerator, shard_map: ShardMap | None
) -> Callable[[object], tuple[Any, str | None]]:
    """``placement.new_placed_id`` for a root placement with no closed database, with
    its lookups bound: the same hash (``_hash_key``), the same logical shard, the same
    generator call and the same database. Keys that are not plain ints in the key range
    take ``new_placed_id`` (it normalises or refuses them)."""
    total = placement.logical_shards
    mixed = placement.key_hash == "mixed"
    make = generator.shard_maker()
    # The alias of every logical shard (``shard_map.database``), indexed directly: the
    # logical shard below is always in range.
    table = shard_map.table if shard_map is not None else None
    if table is not None and len(table) != total:
        return placement.new_placed_id
    slow = placement.new_placed_id

    def place(key: object) -> tuple[Any, str | None]:
        if key.__class__ is not int or not KEY_MIN <= key < KEY_LIMIT:
            return slow(key)
        logical = (mix64(key) if mixed else key) % total
        return make(logical), None if table is None else table[logical]

    return place
