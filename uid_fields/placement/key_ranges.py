"""Key ranges: route rows by an attribute of the application's own (a region, a tenant)
by naming a range of logical shards for each value.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._internal import validate
from .._internal.hashing import mix64
from ..errors import ConfigurationError, ShardKeyError
from .keys import normalize_shard_key
from .shards import (
    ShardMap,
)


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
