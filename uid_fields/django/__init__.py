"""Django integration: fields, router, sharded manager, time lookups, checks."""

from .conf import get_generator
from .fields import LocalityUUIDField, ShardedBigIntField, SnowflakeField, UniqIdField
from .lookups import IdTime
from .query import ShardedManager, ShardedQuerySet, sharded_atomic
from .routing import ShardRouter, UnroutableQueryError, allow_off_shard_writes
from .twophase import resolve_prepared

SnowflakeField.register_lookup(IdTime)
ShardedBigIntField.register_lookup(IdTime)

__all__ = [
    "LocalityUUIDField",
    "ShardRouter",
    "ShardedBigIntField",
    "ShardedManager",
    "ShardedQuerySet",
    "SnowflakeField",
    "UniqIdField",
    "UnroutableQueryError",
    "allow_off_shard_writes",
    "get_generator",
    "resolve_prepared",
    "sharded_atomic",
]
