"""Distributed, decodable ids that carry their shard: the ORM-free core."""

# The package version: pyproject.toml reads it from here ([tool.hatch.version]).
__version__ = "0.3.0"

import logging
from typing import TYPE_CHECKING, Any

from . import locality, uniqid
from .clock import Clock, ManualClock, SystemClock
from .config import UidConfig
from .errors import (
    ClockMovedBackwardsError,
    ConfigurationError,
    CoordinatorUnavailableError,
    CrossDatabaseRelationError,
    DeepOffsetWarning,
    FanOutTimeoutError,
    ForkedGeneratorError,
    LayoutExhaustedError,
    LeaseLostError,
    MalformedCursorError,
    MissingExtraError,
    MoveStateMismatch,
    PublicIdError,
    ReplicationError,
    ReplicationUnavailable,
    ShardKeyError,
    ShardMoveFencedError,
    ShardRoutingError,
    TwoPhaseCommitError,
    UidFieldsError,
    UnknownEntryError,
    UnmergeableQueryError,
    UnprotectedShardWriteWarning,
    WorkerIdsExhaustedError,
    WrongShardError,
    deprecated_name,
)
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
    DecimalParts,
    SnowflakeLayout,
    SnowflakeParts,
)
from .ids.leases import DatabaseLease, RedisLease
from .ids.locality import LocalityParts, LocalityUUIDGenerator
from .ids.nodes import FromEnv
from .ids.parts import IdParts
from .ids.public import PublicIds
from .ids.sequences import RedisSequence
from .ids.uniqid import UniqIdGenerator, UniqIdParts
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

# Each area logs on a logger of its own below this one (docs/logging.md). A library adds
# no handler but a NullHandler: the application decides what is shown, and where.
_log = logging.getLogger("uid_fields")
_log.addHandler(logging.NullHandler())

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
    "CrossDatabaseRelationError",
    "DatabaseLease",
    "DecimalGenerator",
    "DecimalLayout",
    "DecimalParts",
    "DeepOffsetWarning",
    "FanOutTimeoutError",
    "ForkedGeneratorError",
    "FromEnv",
    "IdParts",
    "KeyRanges",
    "LayoutExhaustedError",
    "LeaseLostError",
    "LocalityParts",
    "LocalityUUIDGenerator",
    "MalformedCursorError",
    "ManualClock",
    "MissingExtraError",
    "MoveStateMismatch",
    "PublicIdError",
    "PublicIds",
    "RedisLease",
    "RedisSequence",
    "ReplicationError",
    "ReplicationUnavailable",
    "Route",
    "ShardKeyError",
    "ShardMap",
    "ShardMoveFencedError",
    "ShardRoutingError",
    "ShardedIdGenerator",
    "SnowflakeGenerator",
    "SnowflakeLayout",
    "SnowflakeParts",
    "SystemClock",
    "TwoPhaseCommitError",
    "UidConfig",
    "UidFieldsError",
    "UniqIdGenerator",
    "UniqIdParts",
    "UnknownEntryError",
    "UnmergeableQueryError",
    "UnprotectedShardWriteWarning",
    "WorkerIdsExhaustedError",
    "WrongShardError",
    "__version__",
    "allow_off_shard_writes",
    "locality",
    "uniqid",
]


if TYPE_CHECKING:
    # For type checkers, the deprecated names are spelled out: a module ``__getattr__``
    # would make every misspelt name of this module ``Any`` in user code.
    UnroutableQueryError = ShardRoutingError
else:

    def __getattr__(name: str) -> Any:
        """Deprecated names (``UnroutableQueryError``) still import, with a warning."""
        return deprecated_name(__name__, name)
