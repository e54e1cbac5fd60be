"""Django integration: fields, router, sharded manager, time lookups, checks."""

from .._internal.extras import missing

try:
    import django  # noqa: F401
except ModuleNotFoundError as exc:  # name the extra, not just the module
    raise missing("django", exc) from exc

from typing import TYPE_CHECKING, Any

from ..errors import ShardRoutingError, deprecated_name
from .columns.lookups import IdTime
from .conf import get_generator
from .connections.replicas import read_from_primary
from .connections.transactions import UnprotectedShardWriteWarning
from .connections.twophase import resolve_prepared
from .fields import LocalityUUIDField, ShardedBigIntField, SnowflakeField, UniqIdField
from .ops.moves import shard_move
from .query.pages import DeepOffsetWarning
from .query.query import ShardedManager, ShardedQuerySet, sharded_atomic
from .relations.deletion import two_phase_deletes
from .routing import ShardRouter, allow_off_shard_writes

SnowflakeField.register_lookup(IdTime)
ShardedBigIntField.register_lookup(IdTime)

__all__ = [
    "DeepOffsetWarning",
    "LocalityUUIDField",
    "ShardRouter",
    "ShardRoutingError",
    "ShardedBigIntField",
    "ShardedManager",
    "ShardedQuerySet",
    "SnowflakeField",
    "UniqIdField",
    "UnprotectedShardWriteWarning",
    "allow_off_shard_writes",
    "get_generator",
    "read_from_primary",
    "resolve_prepared",
    "shard_move",
    "sharded_atomic",
    "two_phase_deletes",
]


if TYPE_CHECKING:
    # Spelled out for type checkers: a module ``__getattr__`` would make every misspelt
    # name of this module ``Any`` in user code.
    UnroutableQueryError = ShardRoutingError
else:

    def __getattr__(name: str) -> Any:
        """Deprecated names (``UnroutableQueryError``) still import, with a warning."""
        return deprecated_name(__name__, name)
