"""Conversions between Unix milliseconds, aware datetimes and the strings users type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["UNIX_EPOCH", "datetime_from_ms", "format_ms", "ms_from_datetime", "parse_instant"]

UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def datetime_from_ms(ms: int) -> datetime:
    """The aware UTC datetime of Unix ms; ``ValueError`` naming the value past year 9999
    (a 48-bit millisecond field reaches the year 10889)."""
    try:
        return UNIX_EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise ValueError(
            f"{ms} ms since 1970 is outside the years 1..9999 that a datetime can hold"
        ) from None


def ms_from_datetime(value: datetime | int) -> int:
    """Unix ms of an aware datetime (floored), or an int taken as Unix ms already."""
    if isinstance(value, bool):
        raise TypeError("expected an aware datetime or Unix milliseconds, got a bool")
    if isinstance(value, int):
        return value
    if not isinstance(value, datetime):
        raise TypeError(f"expected an aware datetime or Unix milliseconds, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"naive datetime {value.isoformat()} is ambiguous: give it a timezone (UTC ids)"
        )
    return (value - UNIX_EPOCH) // _ONE_MS


def parse_instant(value: object) -> int:
    """Unix ms from an int, an aware datetime or an ISO 8601 string ('Z' allowed).

    Naive strings are read as UTC, since an epoch written in settings has no other zone.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{value!r} is neither Unix milliseconds nor an ISO 8601 date/time"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return ms_from_datetime(parsed)
    if isinstance(value, (int, datetime)) and not isinstance(value, bool):
        return ms_from_datetime(value)
    raise TypeError(f"expected Unix ms, an aware datetime or an ISO 8601 string, got {value!r}")


def format_ms(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2016-04-30T11:18:25.796Z."""
    return datetime_from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
