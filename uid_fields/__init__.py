"""Distributed, decodable ids that carry their shard: the ORM-free core."""

# The package version: pyproject.toml reads it from here ([tool.hatch.version]).
__version__ = "0.1.0"

from typing import Any

from ._internal import moved
from .clock import Clock, ManualClock, SystemClock
from .config import UidConfig
from .errors import (
    ClockMovedBackwardsError,
    ConfigurationError,
    CoordinatorUnavailableError,
    ForkedGeneratorError,
    LayoutExhaustedError,
    LeaseLostError,
    PublicIdError,
    ShardKeyError,
    ShardRoutingError,
    TwoPhaseCommitError,
    UidFieldsError,
    UnmergeableQueryError,
    WorkerIdsExhaustedError,
    WrongShardError,
    deprecated_name,
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
from .ids.public import PublicIds
from .ids.sequences import RedisSequence
from .ids.uniqid import UniqIdGenerator
from .placement import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    ByUniqIdDigit,
    KeyRanges,
    Route,
    ShardMap,
    allow_off_shard_writes,
)

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
    "ByDecimalServer",
    "ByField",
    "ByLocalityBlock",
    "ByModulo",
    "ByUniqIdDigit",
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
    "PublicIdError",
    "PublicIds",
    "RedisLease",
    "RedisSequence",
    "Route",
    "ShardKeyError",
    "ShardMap",
    "ShardRoutingError",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
    "SnowflakeLayout",
    "SystemClock",
    "TwoPhaseCommitError",
    "UidConfig",
    "UidFieldsError",
    "UniqIdGenerator",
    "UnmergeableQueryError",
    "WorkerIdsExhaustedError",
    "WrongShardError",
    "__version__",
    "allow_off_shard_writes",
    "locality",
    "uniqid",
]


def __getattr__(name: str) -> Any:
    """Deprecated names (``UnroutableQueryError``) still import, with a warning."""
    return deprecated_name(__name__, name)
