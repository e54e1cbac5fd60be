"""Shard keys: the one integer a key stands for, and the logical shard a key or a parent
row picks, scaled between logical spaces so that families stay together.
"""

from __future__ import annotations

import uuid

from .._internal.hashing import mix64
from ..errors import ShardKeyError
from .shards import (
    ShardMap,
)

KEY_MIN = -(1 << 63)
KEY_LIMIT = 1 << 64


def normalize_shard_key(value: object, *, name: str = "shard key") -> int:
    """The one integer a shard key stands for.

    Ints, strings of ASCII digits (a key read from a URL or a form) and UUIDs (their 128
    bits) are keys; a parent row is passed by its id. Booleans, floats, empty or
    non-ASCII strings and out-of-range ints raise ``ShardKeyError``, never pick a shard.
    """
    if isinstance(value, bool):
        raise ShardKeyError(f"{name}={value!r} is a bool, not a key")
    if isinstance(value, int):
        if not KEY_MIN <= value < KEY_LIMIT:
            raise ShardKeyError(f"{name}={value} is out of the 64-bit range of keys")
        return value
    if isinstance(value, uuid.UUID):
        return value.int
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            number = int(text)
            if number >= KEY_LIMIT:
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
