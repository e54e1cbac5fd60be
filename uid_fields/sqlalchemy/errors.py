"""Errors of the SQLAlchemy integration: the core's vocabulary, under the names it had."""

from __future__ import annotations

from ..errors import ShardKeyError, ShardRoutingError

__all__ = ["ShardKeyError", "ShardRoutingError"]
