"""Keyset pages over shards: the rows after a key, ``limit`` rows from each shard.

``session.on_all_shards(stmt.offset(n).limit(k))`` makes every shard return its first
``n + k`` rows (which rows the merged page skips is known only after the merge). A
keyset page asks each shard for the ``k`` rows past the last key shown instead, on the
key's index, whatever the depth (``uid_fields.ops.pages`` says why, and holds the rules)::

    page = keyset_page(session, select(Order.id, Order.customer), Order.id, limit=20)
    more = keyset_page(session, select(Order.id, Order.customer), Order.id,
                       after=page.next_after, limit=20)

``rows_after`` builds the statement alone, for ``on_all_shards`` or any other session.
A cursor the key column cannot hold (``?after=abc`` from a link) is a
``MalformedCursorError``, a ValueError, raised while the statement is built: nothing is
sent, and a web application answers 400 for it (``ShardedSQLAlchemy`` does, with
``bad_cursor_response``), not the 500 of a ``StatementError`` at execution.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import Row

from ..errors import MalformedCursorError
from ..ids.public import PublicIds
from ..ops import pages
from ..ops.pages import (
    DeepOffsetWarning,
    Keyset,
    KeysetPage,
    cursor_key,
    integer_key,
    token_key,
)
from .compat import select_parts

__all__ = [
    "DeepOffsetWarning",
    "KeysetPage",
    "MalformedCursorError",
    "bad_cursor_response",
    "keyset_page",
    "rows_after",
    "rows_before",
]


def rows_after(
    statement: Select[Any],
    column: Any,
    after: Any = None,
    *,
    limit: int,
    descending: bool = True,
    public_ids: PublicIds | None = None,
) -> Select[Any]:
    """``statement``'s first ``limit`` rows after the key ``after`` in ``column``'s order:
    descending (the default: newest ids first), the rows whose key is below ``after``;
    ascending, above it; from the first row when ``after`` is None. The statement gets
    ``WHERE column < :after ORDER BY column DESC LIMIT :limit`` (its own ORDER BY is
    replaced; it must have no LIMIT or OFFSET of its own): through ``on_all_shards`` each
    shard returns ``limit`` rows, never an OFFSET's worth. With ``public_ids`` the cursor
    is a token of that codec, and a raw id is refused (``MalformedCursorError``)."""
    keyset = _keyset(column, descending, limit, after, None, public_ids)
    return _keyed(statement, column, keyset, limit)


def rows_before(
    statement: Select[Any],
    column: Any,
    before: Any,
    *,
    limit: int,
    descending: bool = True,
    public_ids: PublicIds | None = None,
) -> Select[Any]:
    """The ``limit`` rows just before the key ``before`` in ``column``'s order (the
    previous page), fetched in the opposite order: nearest first. ``keyset_page`` puts
    them back in order. ``public_ids``: as ``rows_after``."""
    keyset = _keyset(column, descending, limit, None, before, public_ids)
    return _keyed(statement, column, keyset, limit)


def keyset_page(
    session: Any,
    statement: Select[Any],
    column: Any,
    *,
    after: Any = None,
    before: Any = None,
    limit: int,
    descending: bool = True,
    public_ids: PublicIds | None = None,
) -> KeysetPage[Row[Any]]:
    """One page of ``statement``'s rows over every shard, in ``column``'s order (a unique
    key: the id), after ``after`` or before ``before`` (the first page when neither),
    with the keys of the pages beside it: ``next_after`` (None on the last page) and
    ``previous_before`` (None on the first). Each shard runs the statement once with
    ``LIMIT limit + 1``; the rows are ``on_all_shards``' rows (``Row`` objects).

    With ``public_ids`` (the codec the rows' ids are shown with), the cursors are its
    tokens both ways: ``next_after`` and ``previous_before`` are tokens, and ``after``
    and ``before`` must be (a raw id is refused): a link never shows a stored id."""
    keyset = _keyset(column, descending, limit, after, before, public_ids)
    rows = session.on_all_shards(_keyed(statement, column, keyset, keyset.fetch_limit)).all()
    page = keyset.page(rows, _reader(column))
    return page if public_ids is None else page.keys_as(public_ids.encode)


def _keyset(
    column: Any,
    descending: bool,
    limit: int,
    after: Any,
    before: Any,
    public_ids: PublicIds | None = None,
) -> Keyset:
    """The page's keyset with its cursors read by the column's own conversion (the core's
    ``cursor_key``; tokens of ``public_ids`` first decoded, ``token_key``): a malformed
    one raises here, while the statement is built."""
    convert = _converter(column)
    if public_ids is not None:
        convert = token_key(public_ids, convert)
    return Keyset(
        descending,
        limit,
        after=cursor_key("after", after, convert),
        before=cursor_key("before", before, convert),
    )


def _converter(column: Any) -> Any:
    """How ``column`` reads a cursor: an id type's own ``coerce`` (its layout's range),
    the core's ``integer_key`` for other integer columns, else the value as given (the
    type's bind processing at execution is all SQLAlchemy offers for the rest)."""
    column_type = getattr(column, "type", None)
    coerce = getattr(column_type, "coerce", None)
    if callable(coerce):
        return coerce
    try:
        python_type = column_type.python_type if column_type is not None else None
    except NotImplementedError:
        python_type = None
    if python_type is int:
        return integer_key
    return _as_given


def _as_given(value: Any) -> Any:
    return value


def bad_cursor_response(error: MalformedCursorError) -> tuple[dict[str, str], int]:
    """A web answer for a malformed cursor: 400 with the message and the cursor's name
    (Flask's error handler shape; ``ShardedSQLAlchemy`` registers it)."""
    return {"error": str(error), "cursor": error.param}, 400


def _keyed(statement: Select[Any], column: Any, keyset: Keyset, fetch: int) -> Select[Any]:
    if not isinstance(statement, Select):
        raise TypeError(f"a keyset page reads a SELECT, got {type(statement).__name__}")
    if select_parts(statement).has_window:
        raise ValueError(
            "a keyset page sets its own LIMIT: give the statement without LIMIT/OFFSET"
        )
    if keyset.comparison == "<":
        statement = statement.where(column < keyset.key)
    elif keyset.comparison == ">":
        statement = statement.where(column > keyset.key)
    order = column.desc() if keyset.fetch_descending else column.asc()
    return statement.order_by(None).order_by(order).limit(fetch)


def _reader(column: Any) -> Any:
    name = str(getattr(column, "key", ""))

    def read(row: Any) -> Any:
        if isinstance(row, Row):
            mapping = row._mapping
            if name in mapping:
                return mapping[name]  # select(Order.id, ...): the column by its name
            return getattr(row[0], name)  # select(Order): the entity's attribute
        return getattr(row, name)

    return read


def warn_deep_offset(statement: Any, threshold: int | None, shards: int) -> None:
    """Warn once per statement shape when a fan-out's OFFSET passes ``threshold``."""
    if threshold is None or not isinstance(statement, Select):
        return
    offset = select_parts(statement).offset
    if offset is None or offset <= threshold:
        return  # the common case, before naming the statement's tables
    tables = sorted(str(getattr(f, "name", f)) for f in statement.get_final_froms())
    shape: Hashable = ("sqlalchemy", tuple(tables))
    what = ", ".join(tables) or "a statement"
    pages.warn_deep_offset(offset, threshold, shape, what, shards, stacklevel=3)
