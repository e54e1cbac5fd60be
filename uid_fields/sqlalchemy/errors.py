"""Errors of the SQLAlchemy integration, catchable by name."""

from __future__ import annotations

from ..errors import UidFieldsError

__all__ = ["ShardKeyError", "ShardRoutingError"]


class ShardRoutingError(UidFieldsError, LookupError):
    """A row or statement cannot be routed to a shard, so nothing was sent anywhere."""


class ShardKeyError(UidFieldsError, ValueError):
    """A shard key value of the wrong type or range: raised when it is set, before SQL."""
