"""Distributed, decodable ids that carry their shard: the ORM-free core."""

from . import locality, uniqid
from .clock import Clock, ManualClock, SystemClock
from .errors import (
    ClockMovedBackwardsError,
    CoordinatorUnavailableError,
    ForkedGeneratorError,
    LayoutExhaustedError,
    LeaseLostError,
    UidFieldsError,
    WorkerIdsExhaustedError,
)
from .generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from .layouts import (
    DECIMAL,
    DECIMAL_SQL,
    DISCORD,
    INSTAGRAM,
    PHP_REDIS,
    SONYFLAKE,
    TWITTER,
    DecimalLayout,
    SnowflakeLayout,
)
from .locality import LocalityUUIDGenerator
from .sequences import RedisSequence
from .shards import ShardMap
from .uniqid import UniqIdGenerator
from .workers import DatabaseLease, FromEnv, RedisLease

__all__ = [
    "DECIMAL",
    "DECIMAL_SQL",
    "DISCORD",
    "INSTAGRAM",
    "PHP_REDIS",
    "SONYFLAKE",
    "TWITTER",
    "Clock",
    "ClockMovedBackwardsError",
    "CoordinatorUnavailableError",
    "DatabaseLease",
    "DecimalGenerator",
    "DecimalLayout",
    "ForkedGeneratorError",
    "FromEnv",
    "LayoutExhaustedError",
    "LeaseLostError",
    "LocalityUUIDGenerator",
    "ManualClock",
    "RedisLease",
    "RedisSequence",
    "ShardMap",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
    "SnowflakeLayout",
    "SystemClock",
    "UidFieldsError",
    "UniqIdGenerator",
    "WorkerIdsExhaustedError",
    "locality",
    "uniqid",
]
