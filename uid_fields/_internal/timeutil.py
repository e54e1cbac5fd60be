"""Conversions between Unix milliseconds, aware datetimes and the strings users type."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .validate import integer, shown

__all__ = [
    "MAX_EPOCH_MS",
    "UNIX_EPOCH",
    "check_epoch_ms",
    "datetime_from_ms",
    "describe_ms",
    "format_ms",
    "ms_from_datetime",
    "parse_epoch",
    "parse_instant",
]

UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)

#: The last millisecond of the year 9999 (Unix ms 253402300799999), the latest epoch a
#: layout takes. Epochs run from 1970 (Unix ms 0: ids count time since then, never
#: before) to here: past it no datetime exists, so the layout's epoch, repr and
#: lifetime could not be written out. The validator also refuses an epoch in the future.
MAX_EPOCH_MS = (datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - UNIX_EPOCH) // _ONE_MS

#: Unix ms written as a string have at most this many digits (2**64 has 20).
_MAX_MS_DIGITS = 20


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
        if text.isascii() and text.isdigit():
            if len(text) > _MAX_MS_DIGITS:  # before int(): 5,000 digits would raise there
                raise ValueError(f"{shown(value)} is not Unix milliseconds: too many digits")
            return int(text)
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{shown(value)} is neither Unix milliseconds nor an ISO 8601 date/time"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return ms_from_datetime(parsed)
    if isinstance(value, (int, datetime)) and not isinstance(value, bool):
        return ms_from_datetime(value)
    raise TypeError(
        f"expected Unix ms, an aware datetime or an ISO 8601 string, got {shown(value)}"
    )


def check_epoch_ms(name: str, value: object) -> int:
    """``value`` if it is an epoch a layout can take: Unix ms from 1970 to the year 9999
    (``MAX_EPOCH_MS``); TypeError or ValueError naming ``name`` otherwise."""
    ms = integer(name, value)
    if not 0 <= ms <= MAX_EPOCH_MS:
        when = "before 1970" if ms < 0 else "after the year 9999"
        raise ValueError(
            f"{name}={shown(ms)} is {when}: an epoch is Unix ms from 0 (1970-01-01) "
            f"to {MAX_EPOCH_MS} (9999-12-31T23:59:59.999Z)"
        )
    return ms


def parse_epoch(value: object, name: str = "epoch") -> int:
    """An epoch from settings or the command line (what ``parse_instant`` reads), in
    Unix ms, checked like ``check_epoch_ms``; every error names ``name``."""
    try:
        ms = parse_instant(value)
    except TypeError:
        raise TypeError(
            f"{name} must be Unix ms, an aware datetime or an ISO 8601 string, got {shown(value)}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return check_epoch_ms(name, ms)


def format_ms(ms: int) -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2016-04-30T11:18:25.796Z."""
    return datetime_from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def describe_ms(ms: int) -> str:
    """``format_ms(ms)``, or, for an instant no datetime holds (past the year 9999, as a
    48-bit millisecond field reaches), a text that says so and keeps the number.

    Decoded parts are shown whatever the id: a row restored from elsewhere or a
    hand-made id may carry any time, and its other parts are still worth reading.
    """
    try:
        return format_ms(ms)
    except ValueError:
        return f"out of range: {ms} ms since 1970 is past the year 9999"
