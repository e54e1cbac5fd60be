"""Distributed, decodable ids that carry their shard: the ORM-free core."""

# The package version: pyproject.toml reads it from here ([tool.hatch.version]).
__version__ = "0.1.0"

from . import locality, uniqid
from .clock import Clock, ManualClock, SystemClock
from .errors import (
    ClockMovedBackwardsError,
    ConfigurationError,
    CoordinatorUnavailableError,
    ForkedGeneratorError,
    LayoutExhaustedError,
    LeaseLostError,
    ShardKeyError,
    ShardRoutingError,
    TwoPhaseCommitError,
    UidFieldsError,
    UnroutableQueryError,
    WorkerIdsExhaustedError,
    WrongShardError,
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
from .leases import DatabaseLease, RedisLease
from .locality import LocalityUUIDGenerator
from .placement import KeyRanges
from .sequences import RedisSequence
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
    "ConfigurationError",
    "CoordinatorUnavailableError",
    "DatabaseLease",
    "DecimalGenerator",
    "DecimalLayout",
    "ForkedGeneratorError",
    "FromEnv",
    "KeyRanges",
    "LayoutExhaustedError",
    "LeaseLostError",
    "LocalityUUIDGenerator",
    "ManualClock",
    "RedisLease",
    "RedisSequence",
    "ShardKeyError",
    "ShardMap",
    "ShardRoutingError",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
    "SnowflakeLayout",
    "SystemClock",
    "TwoPhaseCommitError",
    "UidFieldsError",
    "UniqIdGenerator",
    "UnroutableQueryError",
    "WorkerIdsExhaustedError",
    "WrongShardError",
    "__version__",
    "locality",
    "uniqid",
]
