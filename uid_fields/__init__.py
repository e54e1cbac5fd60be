"""Distributed, decodable ids that carry their shard: the ORM-free core."""

from . import locality, uniqid
from .clock import Clock, ManualClock, SystemClock
from .errors import (
    ClockMovedBackwardsError,
    ForkedGeneratorError,
    LayoutExhaustedError,
    UidFieldsError,
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
from .shards import ShardMap
from .uniqid import UniqIdGenerator
from .workers import FromEnv

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
    "DecimalGenerator",
    "DecimalLayout",
    "ForkedGeneratorError",
    "FromEnv",
    "LayoutExhaustedError",
    "LocalityUUIDGenerator",
    "ManualClock",
    "ShardMap",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
    "SnowflakeLayout",
    "SystemClock",
    "UidFieldsError",
    "UniqIdGenerator",
    "locality",
    "uniqid",
]
