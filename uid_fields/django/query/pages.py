"""The warning for a fan-out with a deep OFFSET (``uid_fields.ops.pages`` says why it
costs ``shards x (offset + limit)`` rows, what to use instead, and decides when it
warns, for both adapters)."""

from __future__ import annotations

from typing import Any

from ...ops import pages
from ...ops.pages import DeepOffsetWarning
from ..conf import conf

__all__ = ["DeepOffsetWarning", "warn_deep_offset"]


def warn_deep_offset(model: type[Any], offset: int | None, shards: int) -> None:
    """Warn once per model per process when a fan-out of ``model``'s rows has an OFFSET
    above ``UID_FIELDS["FAN_OUT_OFFSET_WARNING"]`` (1000 by default; None: never)."""
    if not offset:
        return
    label = model._meta.label
    threshold = conf.FAN_OUT_OFFSET_WARNING
    pages.warn_deep_offset(offset, threshold, ("django", label), label, shards, stacklevel=4)
