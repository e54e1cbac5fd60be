"""Pages of rows over shards: keyset pages that cost ``limit`` rows per shard, and the
warning for deep OFFSETs that cost far more.

An OFFSET cannot be pushed down to the shards: which rows the merged page skips is
known only after the merge, so each shard returns its first ``offset + limit`` rows and
the merge drops all but ``limit`` of them. Page 400 of 25 rows over 8 shards reads 80,000
rows to show 25, and walking every page reads a number of rows that grows with the
square of the table. A keyset page instead asks each shard for the ``limit`` rows past
the last key shown (``WHERE id < :key ORDER BY id DESC LIMIT :limit``, on the id's
index) and merges them: its cost does not depend on how deep the page is.

The rules here are the adapters' one source: which cursor is malformed (``cursor_key``:
a 404 in DRF, a ``MalformedCursorError`` when SQLAlchemy's statement is built, never a
database error at execution), which comparison a keyset page sends, how many rows it
fetches to know whether another page follows, which keys the next and the previous
pages start from, and when a fan-out's OFFSET earns a warning.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from .._internal import validate as check
from ..errors import DeepOffsetWarning, MalformedCursorError
from ..ids.layouts import coerce_id
from ..ids.public import PublicIds

__all__ = [
    "DEFAULT_OFFSET_WARNING",
    "DeepOffsetWarning",
    "Keyset",
    "KeysetPage",
    "MalformedCursorError",
    "cursor_key",
    "deep_offset_message",
    "forget_deep_offsets",
    "integer_key",
    "token_key",
    "warn_deep_offset",
]

R = TypeVar("R")

#: A fan-out whose OFFSET is above this warns, once per query shape per process
#: (Django's ``FAN_OUT_OFFSET_WARNING``, SQLAlchemy's ``fan_out_offset_warning``).
DEFAULT_OFFSET_WARNING = 1000


#: Keys a signed 64-bit column can hold: a larger one would be a database error (a 500).
BIGINT_KEYS = range(-(2**63), 2**63)

#: What a column's own conversion raises for a value it cannot hold.
_REFUSED = (TypeError, ValueError, OverflowError)


def integer_key(value: object) -> int:
    """The cursor of an integer key column with no conversion of its own: an int of a
    signed 64-bit column, or its text under the core's one rule for id text
    (``coerce_id``: ASCII digits only, so no sign, space, ``_`` or other script's digits,
    all of which ``int()`` takes). ValueError/TypeError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value in BIGINT_KEYS:
        return value
    return coerce_id(value, max_value=BIGINT_KEYS[-1])


def cursor_key(param: str, value: Any, convert: Callable[[Any], Any]) -> Any:
    """The key a keyset cursor names (None: no cursor, the first page), read by the key
    column's own conversion ``convert`` (an id field's: the layout's range; a plain
    integer's: ``integer_key``).

    A cursor comes from a link, so a value the column cannot hold is the client's
    mistake: a ``MalformedCursorError`` (a ValueError) naming ``param`` when
    ``convert`` refuses it (TypeError, ValueError, OverflowError), when it converts to
    nothing (an empty string) or to an int no signed 64-bit column holds. One rule for
    every adapter: DRF answers 404 for it, SQLAlchemy raises it when the statement is
    built, before any SQL (before, the database driver refused it at execution: a
    ``StatementError``, a 500)."""
    if value is None:
        return None
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    try:
        key = convert(value)
    except _REFUSED as exc:
        raise MalformedCursorError(
            f"malformed keyset cursor {param}={shown}: {exc}", param=param, value=value
        ) from None
    if key is None or key == "" or isinstance(key, bool):
        raise MalformedCursorError(
            f"malformed keyset cursor {param}={shown}: it names no key", param=param, value=value
        )
    if isinstance(key, int) and key not in BIGINT_KEYS:
        raise MalformedCursorError(
            f"malformed keyset cursor {param}={shown}: out of a 64-bit key's range",
            param=param,
            value=value,
        )
    return key


_warned: set[Hashable] = set()
_warned_lock = threading.Lock()


def deep_offset_message(
    offset: int | None, threshold: int | None, shape: Hashable, what: str, shards: int
) -> str | None:
    """The warning for a fan-out of ``what`` over ``shards`` shards with ``offset``: a
    message the first time a ``shape`` passes ``threshold`` in this process, None
    otherwise (below it, ``threshold`` None, or said already)."""
    if threshold is None or offset is None or offset <= threshold:
        return None
    with _warned_lock:
        if shape in _warned:
            return None
        _warned.add(shape)
    return (
        f"a fan-out of {what} with OFFSET {offset}: each of the {shards} shards returned "
        f"its first {offset} + LIMIT rows, merged to keep one page; use keyset pages "
        "(rows after the last id shown: uid_fields.django.rest.KeysetPagination, "
        "uid_fields.sqlalchemy.rows_after) whose cost does not grow with the page number. "
        "Said once per query shape per process."
    )


def warn_deep_offset(
    offset: int | None,
    threshold: int | None,
    shape: Hashable,
    what: str,
    shards: int,
    *,
    stacklevel: int = 2,
) -> None:
    """The rule both adapters follow: a fan-out whose OFFSET is above ``threshold``
    warns ``DeepOffsetWarning``, once per query ``shape`` per process; ``threshold``
    None never warns. Not only with Django's DEBUG on: production is where every shard
    returning ``offset + limit`` rows costs, and once per shape is cheap; the warnings
    filters (``-W``, ``logging.captureWarnings``) choose where it shows. ``stacklevel``
    counts from the caller, as ``warnings.warn`` does."""
    message = deep_offset_message(offset, threshold, shape, what, shards)
    if message is not None:
        warnings.warn(message, DeepOffsetWarning, stacklevel=stacklevel + 1)


def forget_deep_offsets() -> None:
    """Warn again for shapes warned about already (for tests)."""
    with _warned_lock:
        _warned.clear()


@dataclass(frozen=True)
class KeysetPage(Generic[R]):
    """One page of rows in key order, and the keys the pages beside it start from:
    ``next_after`` (rows after it: the next page; None at the end) and
    ``previous_before`` (rows before it: the previous page; None at the start)."""

    rows: list[R]
    next_after: Any
    previous_before: Any

    def keys_as(self, encode: Callable[[Any], Any]) -> KeysetPage[R]:
        """This page with its cursors written by ``encode`` (a public id's token)."""
        after, before = self.next_after, self.previous_before
        return KeysetPage(
            self.rows,
            None if after is None else encode(after),
            None if before is None else encode(before),
        )


@dataclass(frozen=True)
class Keyset:
    """A page of ``limit`` rows after the key ``after`` (or before ``before``) in the
    key's order, descending or ascending. Each shard gets ``comparison`` against
    ``key`` and ``ORDER BY key DESC`` when ``fetch_descending`` (else ASC), with
    ``LIMIT fetch_limit``: one row more than the page, to know whether another follows.
    A page before a key is fetched in the opposite order and turned around."""

    descending: bool
    limit: int
    after: Any = None
    before: Any = None

    def __post_init__(self) -> None:
        check.integer("limit", self.limit, 1)
        if self.after is not None and self.before is not None:
            raise MalformedCursorError(
                "malformed keyset cursor: a page starts after a key or before one, not both",
                param="after/before",
                value=(self.after, self.before),
            )

    @property
    def backwards(self) -> bool:
        return self.before is not None

    @property
    def key(self) -> Any:
        """The key the page starts from (None: the first page)."""
        return self.before if self.backwards else self.after

    @property
    def fetch_descending(self) -> bool:
        return self.descending != self.backwards

    @property
    def comparison(self) -> Literal["<", ">"] | None:
        """How each shard compares its key column with ``key`` (None: no condition)."""
        if self.key is None:
            return None
        return "<" if self.fetch_descending else ">"

    @property
    def fetch_limit(self) -> int:
        return self.limit + 1

    def page(self, rows: Sequence[R], key_of: Callable[[R], Any]) -> KeysetPage[R]:
        """The page from the merged rows (at most ``fetch_limit``, in fetch order)."""
        more = len(rows) > self.limit
        kept = list(rows[: self.limit])
        if self.backwards:
            kept.reverse()
            previous = key_of(kept[0]) if more and kept else None
            following = key_of(kept[-1]) if kept else None
            return KeysetPage(kept, following, previous)
        following = key_of(kept[-1]) if more and kept else None
        previous = key_of(kept[0]) if self.after is not None and kept else None
        return KeysetPage(kept, following, previous)


def token_key(codec: PublicIds, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """How a cursor is read when the key is shown as public ids: the cursor is a token of
    ``codec`` (a link never carries the stored id, which decodes to its time, node and
    sequence), decoded, then read by the key's own ``convert``. A raw id, or any text
    that is no token of these keys, is refused (``cursor_key`` makes it a
    ``MalformedCursorError``): bisecting stored ids through ``?after=`` is not possible."""

    def read(value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("a cursor under public ids is a token")
        return convert(codec.decode(value))

    return read
