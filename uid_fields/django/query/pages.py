"""The DEBUG warning for a fan-out with a deep OFFSET (``uid_fields.ops.pages`` says
why it costs ``shards x (offset + limit)`` rows, and what to use instead)."""

from __future__ import annotations

import warnings
from typing import Any

from django.conf import settings

from ...ops.pages import DeepOffsetWarning, deep_offset_message
from ..conf import conf

__all__ = ["DeepOffsetWarning", "warn_deep_offset"]


def warn_deep_offset(model: type[Any], offset: int | None, shards: int) -> None:
    """With DEBUG on, warn once per model per process when a fan-out of ``model``'s rows
    has an OFFSET above ``UID_FIELDS["FAN_OUT_OFFSET_WARNING"]`` (1000 by default)."""
    if not offset or not settings.DEBUG:
        return
    label = model._meta.label
    message = deep_offset_message(
        offset, conf.FAN_OUT_OFFSET_WARNING, ("django", label), label, shards
    )
    if message is not None:
        warnings.warn(message, DeepOffsetWarning, stacklevel=4)
