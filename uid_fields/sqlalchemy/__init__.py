"""SQLAlchemy 2.x integration: uid column types and fields, and a session that routes by id.

``SnowflakeField``/``ShardedBigIntField``/``LocalityUUIDField`` return ``mapped_column``s
whose ids are assigned when an object is built; ``sharded_session()`` sends every row,
``get()`` and id query to the shard its id names. See docs/sqlalchemy.md.
"""

from ..config import UidConfig
from . import listeners as _listeners  # noqa: F401 - installs the mapper hooks
from .bulk import bulk_insert
from .comparators import IdTime
from .ddl import DatabaseIds
from .errors import ShardKeyError, ShardRoutingError
from .fields import LocalityUUIDField, ShardedBigIntField, SnowflakeField, field_config
from .leases import database_lease, lease_factory, lease_table
from .session import (
    ShardedIdSession,
    async_sharded_session,
    async_sharded_sessionmaker,
    place_on_shard,
    sharded_session,
    sharded_sessionmaker,
)
from .types import LocalityUUIDType, SnowflakeType

__all__ = [
    "DatabaseIds",
    "IdTime",
    "LocalityUUIDField",
    "LocalityUUIDType",
    "ShardKeyError",
    "ShardRoutingError",
    "ShardedBigIntField",
    "ShardedIdSession",
    "SnowflakeField",
    "SnowflakeType",
    "UidConfig",
    "async_sharded_session",
    "async_sharded_sessionmaker",
    "bulk_insert",
    "database_lease",
    "field_config",
    "lease_factory",
    "lease_table",
    "place_on_shard",
    "sharded_session",
    "sharded_sessionmaker",
]
