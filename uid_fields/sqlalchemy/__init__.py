"""SQLAlchemy 2.x integration: uid column types and fields, and a session that routes by id.

``SnowflakeField``/``ShardedBigIntField``/``LocalityUUIDField`` return ``mapped_column``s
whose ids are assigned when an object is built; ``sharded_session()`` sends every row,
``get()`` and id query to the shard its id names. See docs/sqlalchemy.md.

The asyncio sessions (``async_sharded_session``) need the extra ``asyncio`` (SQLAlchemy's
asyncio support needs greenlet) only when one is made.
"""

from .._internal.extras import missing

try:
    import sqlalchemy  # noqa: F401
except ModuleNotFoundError as exc:  # name the extra, not just the module
    raise missing("sqlalchemy", exc) from exc

from ..config import UidConfig
from ..errors import ShardKeyError, ShardRoutingError
from ..placement import allow_off_shard_writes
from . import listeners as _listeners  # noqa: F401 - installs the mapper hooks
from .asyncio import async_sharded_session, async_sharded_sessionmaker
from .audit import audit
from .bulk import bulk_insert
from .comparators import IdTime
from .ddl import DatabaseIds, DecimalIds
from .fences import translate_fence_errors
from .fields import (
    LocalityUUIDField,
    ShardedBigIntField,
    SnowflakeField,
    UniqIdField,
    field_config,
)
from .guard import check_writes
from .leases import database_lease, lease_factory, lease_table
from .moves import shard_move
from .pages import DeepOffsetWarning, KeysetPage, keyset_page, rows_after, rows_before
from .replication import logical_shard_move
from .session import ShardedIdSession, place_on_shard, sharded_session, sharded_sessionmaker
from .twophase import resolve_prepared
from .types import LocalityUUIDType, SnowflakeType, UniqIdType

translate_fence_errors()  # a shard move's fence refuses writes: ShardMoveFencedError

__all__ = [
    "DatabaseIds",
    "DecimalIds",
    "DeepOffsetWarning",
    "IdTime",
    "KeysetPage",
    "LocalityUUIDField",
    "LocalityUUIDType",
    "ShardKeyError",
    "ShardRoutingError",
    "ShardedBigIntField",
    "ShardedIdSession",
    "SnowflakeField",
    "SnowflakeType",
    "UidConfig",
    "UniqIdField",
    "UniqIdType",
    "allow_off_shard_writes",
    "async_sharded_session",
    "async_sharded_sessionmaker",
    "audit",
    "bulk_insert",
    "check_writes",
    "database_lease",
    "field_config",
    "keyset_page",
    "lease_factory",
    "lease_table",
    "logical_shard_move",
    "place_on_shard",
    "resolve_prepared",
    "rows_after",
    "rows_before",
    "shard_move",
    "sharded_session",
    "sharded_sessionmaker",
]
