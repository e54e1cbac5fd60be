"""Exceptions a caller can catch by name."""

from __future__ import annotations

__all__ = [
    "ClockMovedBackwardsError",
    "ForkedGeneratorError",
    "LayoutExhaustedError",
    "UidFieldsError",
]


class UidFieldsError(Exception):
    """Base class of every error raised by uid_fields itself."""


class ClockMovedBackwardsError(UidFieldsError, RuntimeError):
    """The clock went back further than the generator's policy tolerates; no id was issued."""

    def __init__(self, behind_ms: float, tolerance_ms: float) -> None:
        self.behind_ms = behind_ms
        self.tolerance_ms = tolerance_ms
        super().__init__(
            f"clock moved backwards by {behind_ms:.3f} ms, more than the "
            f"{tolerance_ms:g} ms this generator waits out (max_backward_ms); refusing to "
            "issue ids until the clock passes the last issued time"
        )


class LayoutExhaustedError(UidFieldsError, OverflowError):
    """The time field is full: ids at this instant no longer fit the layout's range."""


class ForkedGeneratorError(UidFieldsError, RuntimeError):
    """A forked child inherited a generator whose node id is fixed (shared with the parent)."""
