"""Keyset pages over shards: each shard is asked for LIMIT rows past the key (no OFFSET),
walking the pages gives every row once in one database's order, and a deep OFFSET in a
fan-out warns once."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine

from uid_fields.errors import MalformedCursorError
from uid_fields.ops import pages
from uid_fields.sqlalchemy import (
    DeepOffsetWarning,
    bulk_insert,
    keyset_page,
    rows_after,
    rows_before,
    sharded_session,
)

from .models import ORDER_PUBLIC_IDS, Order

pytestmark = pytest.mark.versions

ROWS = 23
LIMIT = 5


def _fill(shards: dict[str, Engine]) -> list[int]:
    with sharded_session(shards) as session:
        bulk_insert(session, Order, [{"customer": f"c{i}"} for i in range(ROWS)])
        session.commit()
        ids = list(session.on_all_shards(select(Order.id)).scalars())
    assert len(ids) == ROWS
    return ids


@contextmanager
def selects_sent(shards: dict[str, Engine]) -> Iterator[list[tuple[str, Any]]]:
    """(SQL, parameters) of every SELECT the shards' engines sent."""
    sent: list[tuple[str, Any]] = []

    def before(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    for engine in shards.values():
        event.listen(engine, "before_cursor_execute", before)
    try:
        yield sent
    finally:
        for engine in shards.values():
            event.remove(engine, "before_cursor_execute", before)


def _no_offset(sql: str, parameters: Any) -> bool:
    """No OFFSET, or SQLite's ``LIMIT ? OFFSET ?`` (its dialect writes one with every
    LIMIT) bound to 0."""
    if "OFFSET" not in sql.upper():
        return True
    return sql.rstrip().upper().endswith("OFFSET ?") and list(parameters)[-1] == 0


@pytest.mark.parametrize("descending", [True, False])
def test_walking_keyset_pages_gives_every_row_once_in_order_with_limit_per_shard(
    shards: dict[str, Engine], descending: bool
) -> None:
    ids = sorted(_fill(shards), reverse=descending)
    seen: list[int] = []
    statement = select(Order.id, Order.customer)
    with sharded_session(shards) as session, selects_sent(shards) as selects:
        page = keyset_page(session, statement, Order.id, limit=LIMIT, descending=descending)
        pages_seen = [page]
        while page.next_after is not None:
            page = keyset_page(
                session,
                statement,
                Order.id,
                after=page.next_after,
                limit=LIMIT,
                descending=descending,
            )
            pages_seen.append(page)
    seen = [row.id for p in pages_seen for row in p.rows]
    assert seen == ids  # every row once, in one database's order
    assert len(pages_seen) == -(-ROWS // LIMIT)
    assert pages_seen[0].previous_before is None
    assert len(selects) == len(pages_seen) * len(shards)  # one statement per shard per page
    for sql, parameters in selects:
        assert "LIMIT" in sql.upper() and _no_offset(sql, parameters), sql
    later = [sql for sql, _ in selects if ("<" if descending else ">") in sql]
    assert len(later) == (len(pages_seen) - 1) * len(shards)  # WHERE id < :key past page 1
    # back from the last page: the previous pages, in order
    with sharded_session(shards) as session:
        back = keyset_page(
            session,
            statement,
            Order.id,
            before=pages_seen[-1].previous_before,
            limit=LIMIT,
            descending=descending,
        )
    assert [row.id for row in back.rows] == [row.id for row in pages_seen[-2].rows]


def test_rows_after_pushes_only_the_limit_to_each_shard(
    sqlite_shards: dict[str, Engine],
) -> None:
    ids = sorted(_fill(sqlite_shards), reverse=True)
    with sharded_session(sqlite_shards) as session, selects_sent(sqlite_shards) as selects:
        rows = session.on_all_shards(rows_after(select(Order), Order.id, ids[9], limit=3))
        orders = list(rows.scalars())
    assert [o.id for o in orders] == ids[10:13]
    assert len(selects) == len(sqlite_shards)
    for sql, parameters in selects:
        assert "LIMIT" in sql.upper() and "<" in sql and _no_offset(sql, parameters), sql
        assert 3 in list(parameters)  # the page's limit, not an offset's worth


def test_a_deep_offset_in_a_fan_out_warns_once(sqlite_shards: dict[str, Engine]) -> None:
    _fill(sqlite_shards)
    pages.forget_deep_offsets()
    deep = select(Order.id).order_by(Order.id).offset(12).limit(2)
    shallow = select(Order.id).order_by(Order.id).offset(10).limit(2)
    with sharded_session(sqlite_shards, fan_out_offset_warning=10) as session:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session.on_all_shards(shallow).all()
            assert caught == []  # at the threshold: no warning
            session.on_all_shards(deep).all()
            session.on_all_shards(deep).all()
            session.on_all_shards(deep.offset(20)).all()
        raised = [w for w in caught if issubclass(w.category, DeepOffsetWarning)]
        assert len(raised) == 1, [str(w.message) for w in caught]
        assert "OFFSET 12" in str(raised[0].message) and "keyset" in str(raised[0].message)
    with sharded_session(sqlite_shards, fan_out_offset_warning=None) as session:
        pages.forget_deep_offsets()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session.on_all_shards(deep).all()
        assert caught == []
    pages.forget_deep_offsets()


#: The cursors the DRF pagination answers 404 for (tests/django/test_keyset_pages.py),
#: as a query string would give them, and values no id column can hold.
MALFORMED = [
    "abc",
    "",
    "-1",
    "99999999999999999999999999",
    "1.5",
    " 12",
    "\uff11\uff12",  # fullwidth digits: int() takes them, the core's rule does not
    2**64,
    -5,
    True,
]


@pytest.mark.parametrize("cursor", MALFORMED)
def test_a_malformed_cursor_is_refused_when_the_statement_is_built(
    sqlite_shards: dict[str, Engine], cursor: Any
) -> None:
    """Issue 35: a malformed ``after`` failed only at execution, as SQLAlchemy's
    StatementError (an HTTP 500); it is a MalformedCursorError (a ValueError) from
    building the statement, before any SQL is sent."""
    _fill(sqlite_shards)
    statement = select(Order.id, Order.customer)
    with pytest.raises(MalformedCursorError) as raised:
        rows_after(statement, Order.id, cursor, limit=LIMIT)
    assert isinstance(raised.value, ValueError)
    with pytest.raises(MalformedCursorError):
        rows_before(statement, Order.id, cursor, limit=LIMIT)
    with sharded_session(sqlite_shards) as session, selects_sent(sqlite_shards) as selects:
        with pytest.raises(MalformedCursorError, match="after"):
            keyset_page(session, statement, Order.id, after=cursor, limit=LIMIT)
        with pytest.raises(MalformedCursorError, match="before"):
            keyset_page(session, statement, Order.id, before=cursor, limit=LIMIT)
    assert selects == []  # refused before any shard was asked


def test_after_and_before_together_is_a_malformed_cursor(
    sqlite_shards: dict[str, Engine],
) -> None:
    ids = _fill(sqlite_shards)
    with sharded_session(sqlite_shards) as session, pytest.raises(MalformedCursorError):
        keyset_page(session, select(Order.id), Order.id, after=ids[0], before=ids[1], limit=LIMIT)


def test_a_cursor_as_its_text_pages_like_the_id(sqlite_shards: dict[str, Engine]) -> None:
    """A link's ``?after=<digits>`` is the id it spells, under the core's rule for id
    text (the one DRF's pagination reads)."""
    ids = sorted(_fill(sqlite_shards), reverse=True)
    with sharded_session(sqlite_shards) as session:
        by_text = keyset_page(session, select(Order.id), Order.id, after=str(ids[4]), limit=3)
        by_int = keyset_page(session, select(Order.id), Order.id, after=ids[4], limit=3)
    assert [r.id for r in by_text.rows] == [r.id for r in by_int.rows] == ids[5:8]


def test_under_public_ids_the_cursors_are_tokens_and_a_raw_id_is_refused(
    sqlite_shards: dict[str, Engine],
) -> None:
    """``keyset_page(..., public_ids=codec)``: ``next_after``/``previous_before`` are
    tokens, a token pages as its id did, and a raw id (or another model's token) is a
    ``MalformedCursorError`` when the statement is built (issue 37, item 3)."""
    ids = sorted(_fill(sqlite_shards), reverse=True)
    statement = select(Order.id, Order.customer)
    with sharded_session(sqlite_shards) as session:
        page = keyset_page(session, statement, Order.id, limit=LIMIT, public_ids=ORDER_PUBLIC_IDS)
        tokens = [page.next_after]
        seen = [row.id for row in page.rows]
        while page.next_after is not None:
            page = keyset_page(
                session,
                statement,
                Order.id,
                after=page.next_after,
                limit=LIMIT,
                public_ids=ORDER_PUBLIC_IDS,
            )
            seen += [row.id for row in page.rows]
            tokens += [page.next_after, page.previous_before]
    assert seen == ids
    shown = [t for t in tokens if t is not None]
    assert shown and all(isinstance(t, str) and t.startswith("ord_") for t in shown)
    assert {ORDER_PUBLIC_IDS.decode(t) for t in shown} <= set(ids)
    for raw in [ids[3], str(ids[3]), "pho_" + "0" * 21]:
        with pytest.raises(MalformedCursorError):
            rows_after(statement, Order.id, raw, limit=LIMIT, public_ids=ORDER_PUBLIC_IDS)
