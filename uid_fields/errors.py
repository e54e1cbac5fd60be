"""Exceptions a caller can catch by name."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

__all__ = [
    "ClockMovedBackwardsError",
    "ConfigurationError",
    "CoordinatorUnavailableError",
    "CrossDatabaseRelationError",
    "DeepOffsetWarning",
    "FanOutTimeoutError",
    "ForkedGeneratorError",
    "LayoutExhaustedError",
    "LeaseLostError",
    "MalformedCursorError",
    "MissingExtraError",
    "MoveStateMismatch",
    "PublicIdError",
    "ReplicationError",
    "ReplicationUnavailable",
    "ShardKeyError",
    "ShardMoveFencedError",
    "ShardRoutingError",
    "TwoPhaseCommitError",
    "UidFieldsError",
    "UnknownEntryError",
    "UnmergeableQueryError",
    "UnprotectedShardWriteWarning",
    "WorkerIdsExhaustedError",
    "WrongShardError",
]


class UidFieldsError(Exception):
    """Base class of every error raised by uid_fields itself."""


class ClockMovedBackwardsError(UidFieldsError, RuntimeError):
    """The clock went back further than the generator's policy tolerates; no id was issued."""

    def __init__(self, behind_ms: float, tolerance_ms: float, message: str | None = None) -> None:
        self.behind_ms = behind_ms
        self.tolerance_ms = tolerance_ms
        super().__init__(
            message
            or f"clock moved backwards by {behind_ms:.3f} ms, more than the "
            f"{tolerance_ms:g} ms this generator waits out (max_backward_ms); refusing to "
            "issue ids until the clock passes the last issued time"
        )


class LayoutExhaustedError(UidFieldsError, OverflowError):
    """The time field is full: ids at this instant no longer fit the layout's range."""


class ForkedGeneratorError(UidFieldsError, RuntimeError):
    """A forked child inherited a generator whose node id is fixed (shared with the parent)."""


class LeaseLostError(UidFieldsError, RuntimeError):
    """A leased node id was not renewed in time (or was taken): the generator is fenced.

    No id was issued. The lease keeps trying to claim a fresh id in the background; the
    generator resumes on its own once one is held.
    """


class TwoPhaseCommitError(UidFieldsError, RuntimeError):
    """A two-phase commit across shards did not commit; nothing of it was committed."""


class WorkerIdsExhaustedError(UidFieldsError, RuntimeError):
    """Every id of a node field's range is leased by a live holder."""

    def __init__(self, message: str, *, count: int) -> None:
        self.count = count
        super().__init__(message)


class CoordinatorUnavailableError(UidFieldsError, ConnectionError):
    """The Redis server or database that hands out node ids could not be reached."""


class ConfigurationError(UidFieldsError, ValueError):
    """A settings dict (generators, shard maps, leases) is malformed; names the key.

    Django reports these as system checks; SQLAlchemy users see them when they build
    generators and maps from the dict.
    """


class ShardRoutingError(UidFieldsError, LookupError):
    """A row or a query names no shard, so nothing was sent anywhere.

    Raised by both ORMs instead of silently reading one database (Django's ``default``)
    or silently reading them all: route by id or shard key, pick a shard, or fan out on
    purpose (``on_all_shards()``).
    """


class ShardKeyError(UidFieldsError, ValueError):
    """A shard key is missing, or is not a value a shard can be picked by.

    A ``ValueError``, so forms and serializers that catch ``ValueError`` report it as a
    field error.
    """


class WrongShardError(UidFieldsError, ValueError):
    """A write was sent to a database that the row's id (or its parent's) does not name.

    The row would be stored where no routed read could find it. ``database`` is where
    the write was sent, ``expected`` where the id says the row lives.
    """

    def __init__(self, message: str, *, database: str, expected: str) -> None:
        self.database = database
        self.expected = expected
        super().__init__(message)


class ShardMoveFencedError(UidFieldsError, RuntimeError):
    """A write to rows of logical shards that a shard move is switching to another
    database was refused; nothing of the statement was written. Retry it shortly.

    The move's fence (triggers the move installs on the source database, see
    docs/scaling.md) closes the moving range for writes from the final catch-up until
    the new map is deployed, so the copy the new database takes over is exact. Once the
    new map is live, the same write goes to the new database and succeeds: retrying
    after a short wait (with the new map reloaded) is the right answer. ``move`` names
    the move, ``table`` the table, ``low``/``high`` its logical shards (``high``
    excluded; both None when the whole table is closed) and ``database`` where the write
    was sent (None when not known).
    """

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        move: str,
        table: str,
        low: int | None,
        high: int | None,
        database: str | None = None,
    ) -> None:
        self.move, self.table, self.low, self.high = move, table, low, high
        self.database = database
        super().__init__(message)


class UnmergeableQueryError(UidFieldsError, NotImplementedError):
    """A fanned-out query whose per-shard answers cannot be merged into the one answer a
    single database would give (GROUP BY, DISTINCT, an ordering the merge cannot repeat);
    nothing was returned."""


class CrossDatabaseRelationError(UidFieldsError, NotImplementedError):
    """A filter, ordering, value or annotation through a relation whose rows live on
    another database than the query's: a JOIN there would find no table, or another
    database's rows. Raised before any query runs; the message names the path, the
    databases, and what to do instead (filter by the key, or read the related rows first)."""


class FanOutTimeoutError(UidFieldsError, TimeoutError):
    """A fan-out's deadline passed before every shard answered; ``shards`` names the ones
    that did not. Their queries were interrupted and their connections discarded."""

    def __init__(self, message: str, *, shards: list[str]) -> None:
        self.shards = shards
        super().__init__(message)


class PublicIdError(UidFieldsError, ValueError):
    """A public id token that is not one of this codec: another model's prefix, a key
    version no longer (or not yet) configured, a truncated, tampered or malformed token.

    A ``ValueError``, so URL converters answer 404 and forms and serializers report it as
    a field error. The message says which rule failed, never a secret.
    """


class MalformedCursorError(UidFieldsError, ValueError):
    """A keyset page's cursor (``after``/``before``) that names no key the column can
    hold: not an id by the core's rule for id text, out of the column's range, empty,
    or both cursors at once. Raised when the statement is built, before any SQL: the
    cursor comes from a link, so it is the client's mistake (a 400 or a 404), not a
    database error at execution (a 500). ``param`` names the cursor, ``value`` is what
    it held.
    """

    def __init__(self, message: str, *, param: str, value: object) -> None:
        self.param, self.value = param, value
        super().__init__(message)


class MissingExtraError(UidFieldsError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra to install."""


class DeepOffsetWarning(RuntimeWarning):
    """A fan-out with a deep OFFSET: every shard returned ``offset + limit`` rows for a
    page of ``limit``. Use keyset pages (rows after the last id shown) instead."""


class ReplicationError(UidFieldsError, RuntimeError):
    """The replication move could not go on (a comparison that differs, a timeout)."""


class ReplicationUnavailable(UidFieldsError, ValueError):
    """The databases cannot carry a move by replication; the message says the fix."""


class MoveStateMismatch(UidFieldsError, ValueError):
    """A state file that belongs to another move (or to one that is over)."""


class UnknownEntryError(ConfigurationError, LookupError):
    """A generator or shard map name the settings do not configure: a
    ``ConfigurationError``, and a ``LookupError`` as Django's ``get_generator`` raised."""


class UnprotectedShardWriteWarning(RuntimeWarning):
    """A shard write inside a transaction that holds none on that shard.

    The row commits on its own and an exception in the block does not roll it back.
    Warned when DEBUG is on; ``UID_FIELDS["UNPROTECTED_SHARD_WRITES"] = "error"`` raises
    it instead (in tests too, where Django turns DEBUG off), ``"warn"`` warns always.
    """


#: Names kept importable for one minor version, each with a DeprecationWarning.
DEPRECATED_NAMES = {"UnroutableQueryError": ("ShardRoutingError", ShardRoutingError)}


def deprecated_name(module: str, name: str) -> Any:
    """The object behind a deprecated name of ``module``, with a DeprecationWarning; the
    ``AttributeError`` of a missing name otherwise. Called by module ``__getattr__``s."""
    if name in DEPRECATED_NAMES:
        new, value = DEPRECATED_NAMES[name]
        warnings.warn(
            f"{module}.{name} is deprecated: it is {new} (the same class); import that",
            DeprecationWarning,
            stacklevel=3,
        )
        return value
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


if TYPE_CHECKING:
    # Spelled out for type checkers: a module ``__getattr__`` would make every misspelt
    # name of this module ``Any`` in user code.
    UnroutableQueryError = ShardRoutingError
else:

    def __getattr__(name: str) -> Any:
        """Deprecated names (``UnroutableQueryError``) still import, with a warning."""
        return deprecated_name(__name__, name)
