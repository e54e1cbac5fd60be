"""The rules both adapters follow are decided once, in the core, and the adapters agree:
each test here runs the same case through the Django adapter and the SQLAlchemy one."""

from __future__ import annotations

import re
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.test import override_settings
from sqlalchemy import Column, MetaData, String, Table, create_engine, event, select
from sqlalchemy.engine import Engine

from tests.django.testapp.models import Order, PageView, Ranked
from tests.sqlalchemy.models import Base, Event
from tests.sqlalchemy.models import Order as SqlaOrder
from uid_fields.django import DeepOffsetWarning
from uid_fields.django.query import fanout as django_fanout
from uid_fields.django.query.id_lookups import valid_id
from uid_fields.ops import merge, pages, parallel
from uid_fields.sql.collation import forget_column_collations
from uid_fields.sqlalchemy import fanout as sqlalchemy_fanout
from uid_fields.sqlalchemy import sharded_session

pytestmark = pytest.mark.django_db(databases="__all__")

THRESHOLD = 8


@pytest.fixture
def sqlalchemy_shards(tmp_path: Path) -> Iterator[dict[str, Engine]]:
    engines = {f"s{n}": create_engine(f"sqlite:///{tmp_path / f's{n}.db'}") for n in range(2)}
    for engine in engines.values():
        Base.metadata.create_all(engine)
    yield engines
    for engine in engines.values():
        engine.dispose()


def _deep_offset_warnings(run: Callable[[], Any]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [str(w.message) for w in caught if issubclass(w.category, DeepOffsetWarning)]


def test_a_deep_offset_warns_alike_in_both_adapters(
    sqlalchemy_shards: dict[str, Engine],
) -> None:
    """Above the threshold, once per query shape, whatever DEBUG says (tests run with
    it off, as production does: where a deep OFFSET costs)."""
    assert not settings.DEBUG
    limits = {**settings.UID_FIELDS, "FAN_OUT_OFFSET_WARNING": THRESHOLD}
    offsets = (THRESHOLD, THRESHOLD + 1, THRESHOLD + 5)
    pages.forget_deep_offsets()
    try:
        with override_settings(UID_FIELDS=limits):
            django = [
                _deep_offset_warnings(partial(list, Order.objects.on_all_shards()[o : o + 2]))
                for o in offsets
            ]
        with sharded_session(sqlalchemy_shards, fan_out_offset_warning=THRESHOLD) as session:
            statement = select(SqlaOrder.id).order_by(SqlaOrder.id).limit(2)

            def page(offset: int) -> list[Any]:
                return list(session.on_all_shards(statement.offset(offset)).all())

            sqlalchemy = [_deep_offset_warnings(partial(page, o)) for o in offsets]
    finally:
        pages.forget_deep_offsets()
    assert [len(found) for found in django] == [0, 1, 0]  # at it: none; above: once
    assert [len(found) for found in sqlalchemy] == [0, 1, 0]
    said = f"OFFSET {THRESHOLD + 1}"
    assert said in django[1][0] and said in sqlalchemy[1][0]


#: Mixed case and accents: a case-insensitive MariaDB collation ties "a" and "A".
NAMES = ["a", "B", "A", "b", "é", "e", "Z", "ab", "a b", "_x", "E"]


class _OneColumnPlan:
    """What the SQLAlchemy ranker asks of a fan-out's plan: the column of a sort key."""

    def __init__(self, column: Any) -> None:
        self.column = column

    def column_of(self, key: merge.SortKey) -> Any:
        return self.column


def _order(ranks: Mapping[str, int]) -> dict[str, int]:
    """Each of ``NAMES`` by its place among them (a ranker's numbers may count strings
    it ranked before)."""
    places = sorted({ranks[name] for name in NAMES})
    return {name: places.index(ranks[name]) for name in NAMES}


def test_text_keys_rank_alike_in_both_adapters() -> None:
    """The same column of the same database ranks its strings alike through either
    adapter, under each name SQLAlchemy gives the backend (Django calls MariaDB's
    ``"mysql"``; SQLAlchemy says ``"mysql"`` or ``"mariadb"``)."""
    alias = "shard_0"
    connection = connections[alias]
    forget_column_collations()
    key = merge.SortKey(lambda row: row, name="name")
    by_django = _order(django_fanout._text_ranker(Ranked, alias)(key, NAMES))

    def run(sql: str, params: dict[str, Any]) -> list[Any]:
        with connection.cursor() as cursor:
            cursor.execute(re.sub(r":(\w+)", r"%(\1)s", sql), params)
            return list(cursor.fetchall())

    table = Table(Ranked._meta.db_table, MetaData(), Column("name", String(20)))
    plan = _OneColumnPlan(table.c.name)
    spellings = ["mysql", "mariadb"] if connection.vendor == "mysql" else [connection.vendor]
    for dialect in spellings:
        ranker = sqlalchemy_fanout.text_ranker(plan, alias, dialect, run)  # type: ignore[arg-type]
        assert _order(ranker(key, NAMES)) == by_django, dialect
    if connection.vendor == "mysql":  # case-insensitive: ties, as the database sorts
        assert by_django["a"] == by_django["A"]
    forget_column_collations()


_UUID = uuid.UUID("0195d1f8-8b5e-7c3a-9f00-0123456789ab")

#: What a URL, a form or a lookup may hand either adapter as an id: ints in and out of
#: range, text with signs, spaces, other scripts' digits, a bool, a float.
INT_CANDIDATES: list[Any] = [
    12, 0, -1, 2**63 - 1, 2**63, 2**64, True, 12.0, "12", "012", " 12", "12\n", "+12",
    "-1", "1_2", "١٢", "0x10", "", "x", b"12", None,
]  # fmt: skip
UUID_CANDIDATES: list[Any] = [
    _UUID, str(_UUID), str(_UUID).upper(), _UUID.hex, f"{{{_UUID}}}", f"urn:uuid:{_UUID}",
    f" {_UUID}", f"{_UUID}\n", _UUID.int, -1, 2**128, _UUID.bytes, True, "", "x", None,
]  # fmt: skip


def _django_id(field: Any, value: Any) -> Any:
    """What the Django adapter makes of ``value`` as an id of ``field``: the id, or
    ``"no id"`` (a lookup drops it: it matches no row)."""
    if not valid_id(field, value):
        return "no id"
    return field.to_python(value)


def _sqlalchemy_id(column_type: Any, value: Any) -> Any:
    """The same for the SQLAlchemy adapter: what its type binds, or ``"no id"`` where it
    refuses (``session.get`` answers None)."""
    if value is None:
        return None
    try:
        return column_type.coerce(value)
    except (TypeError, ValueError):
        return "no id"


@pytest.mark.parametrize(
    ("django_field", "sqlalchemy_type", "candidates"),
    [
        (Order._meta.pk, SqlaOrder.__table__.c.id.type, INT_CANDIDATES),
        (PageView._meta.pk, Event.__table__.c.id.type, UUID_CANDIDATES),
    ],
    ids=["int", "uuid"],
)
def test_a_malformed_id_is_cleaned_alike_in_both_adapters(
    django_field: Any, sqlalchemy_type: Any, candidates: list[Any]
) -> None:
    django = {repr(v): _django_id(django_field, v) for v in candidates}
    sqlalchemy = {repr(v): _sqlalchemy_id(sqlalchemy_type, v) for v in candidates}
    assert django == sqlalchemy


def _django_read_threads(in_atomic: bool) -> set[int]:
    """The threads a Django fan-out's statements ran on, seen from this thread's
    connections (a pool thread's connections are its own: their statements are not)."""
    seen: set[int] = set()

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.add(threading.get_ident())
        return execute(sql, params, many, context)

    aliases = list(Order.objects.on_all_shards()._shard_databases())
    with ExitStack() as stack:
        for alias in aliases:
            stack.enter_context(connections[alias].execute_wrapper(record))
        if in_atomic:
            stack.enter_context(transaction.atomic(using=aliases[0]))
            connections[aliases[0]].ensure_connection()
        list(Order.objects.on_all_shards())
    return seen


def _sqlalchemy_read_threads(shards: dict[str, Engine], in_transaction: bool) -> set[int]:
    seen: set[int] = set()

    def record(*args: Any) -> None:
        seen.add(threading.get_ident())

    for engine in shards.values():
        event.listen(engine, "before_cursor_execute", record)
    try:
        with sharded_session(shards) as session:
            if in_transaction:
                session.add(SqlaOrder(customer="c"))
                session.flush()  # the transaction holds work on a shard
                seen.clear()
            session.on_all_shards(select(SqlaOrder)).all()
    finally:
        for engine in shards.values():
            event.remove(engine, "before_cursor_execute", record)
    return seen


@pytest.mark.django_db(transaction=True, databases="__all__")  # no test transaction
@pytest.mark.parametrize("in_transaction", [False, True], ids=["alone", "in-a-transaction"])
def test_both_adapters_read_shards_at_once_by_the_same_rule(
    sqlalchemy_shards: dict[str, Engine], in_transaction: bool
) -> None:
    """Each adapter reads every shard at once (on pool threads) exactly when the core's
    ``may_run_at_once`` says so, else one after another on the caller's connections; a
    transaction holding a shard is no reason to read one by one in either: its
    connection is read where it is, or lent to a pool thread, beside the others."""
    here = {threading.get_ident()}
    aliases = list(Order.objects.on_all_shards()._shard_databases())
    at_once = parallel.may_run_at_once(
        [connections[a].vendor for a in aliases], holds_shard_work=False
    )
    django = _django_read_threads(in_transaction)
    if not at_once:
        assert django == here
    elif in_transaction:  # the transaction's connection, lent to a pool thread
        assert django - here
    else:  # the pool threads' own connections: none of this thread's
        assert django == set()
    vendors = [e.dialect.name for e in sqlalchemy_shards.values()]
    sqlalchemy_at_once = parallel.may_run_at_once(vendors, holds_shard_work=False)
    threads = _sqlalchemy_read_threads(sqlalchemy_shards, in_transaction)
    assert bool(threads - here) if sqlalchemy_at_once else (threads == here)
