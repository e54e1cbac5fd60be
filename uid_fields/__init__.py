"""Distributed, decodable ids that carry their shard: the ORM-free core."""

# The package version: pyproject.toml reads it from here ([tool.hatch.version]).
__version__ = "0.1.0"

from ._internal import moved
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
from .ids import locality, uniqid
from .ids.generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from .ids.layouts import (
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
from .ids.leases import DatabaseLease, RedisLease
from .ids.locality import LocalityUUIDGenerator
from .ids.nodes import FromEnv
from .ids.sequences import RedisSequence
from .ids.uniqid import UniqIdGenerator
from .placement.key_ranges import KeyRanges
from .placement.shards import ShardMap

# Old import paths of the modules that moved keep working, with a DeprecationWarning.
moved.install()

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
