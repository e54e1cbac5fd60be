"""Strict routing and the explicit fan-out: the same answers as one database would give."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event, func, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, selectinload

from uid_fields.ops import parallel
from uid_fields.sqlalchemy import ShardRoutingError, bulk_insert, sharded_session
from uid_fields.sqlalchemy.fanout import UnmergeableQueryError

from .conftest import SHARDS, recording
from .models import Base, Order

pytestmark = pytest.mark.versions


@pytest.fixture
def loaded(shards: dict[str, Engine]) -> Iterator[tuple[dict[str, Engine], Engine]]:
    """200 orders over the shards, and the same rows in one reference database."""
    rows = [{"customer": f"c{i % 7}"} for i in range(200)]
    with sharded_session(shards) as session:
        ids = bulk_insert(session, Order, rows)
        session.commit()
    rows = [{"id": i, **row} for i, row in zip(ids, rows, strict=True)]
    reference = create_engine("sqlite://")
    Base.metadata.create_all(reference)
    with Session(reference) as plain:
        plain.execute(Order.__table__.insert(), rows)  # same ids and customers
        plain.commit()
    yield shards, reference
    reference.dispose()


STATEMENTS = {
    "count": lambda: select(func.count()).select_from(Order),
    "min, max, sum": lambda: select(
        func.min(Order.id), func.max(Order.id), func.sum(func.length(Order.customer))
    ),
    "newest five": lambda: select(Order).order_by(Order.id.desc()).limit(5),
    "a page by customer": lambda: (
        select(Order).order_by(Order.customer, Order.id).offset(13).limit(9)
    ),
    "columns": lambda: (
        select(Order.customer, Order.id)
        .where(Order.customer != "c3")
        .order_by(Order.customer.desc(), Order.id)
        .limit(25)
    ),
    "everything in id order": lambda: select(Order),
}


def _plain(rows: list[object]) -> list[object]:
    """Rows as plain values: an order by its id."""
    return [tuple(v.id if isinstance(v, Order) else v for v in row) for row in rows]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_fan_out_answers_as_one_database(
    name: str, loaded: tuple[dict[str, Engine], Engine]
) -> None:
    shards, reference = loaded
    statement = STATEMENTS[name]()
    if name == "everything in id order":
        expected_statement = statement.order_by(Order.id)
    else:
        expected_statement = statement
    with Session(reference) as plain:
        expected = _plain(list(plain.execute(expected_statement).all()))
    with sharded_session(shards) as session, recording(shards) as log:
        merged = _plain(list(session.on_all_shards(statement).all()))
        # Text keys: the collation's ranks, asked once per merge at most (and on MariaDB
        # the column's collation, once per process).
        ranks = len([s for s in log.sql("SELECT") if "DENSE_RANK" in s])
        lookups = len([s for s in log.sql("SELECT") if "information_schema" in s])
        assert log.engines_used() == set(SHARDS) and log.count() - ranks - lookups == 4
        assert ranks <= 1 and lookups <= 1
    assert merged == expected


def test_statements_naming_no_shard_are_refused(loaded: tuple[dict[str, Engine], Engine]) -> None:
    shards, _ = loaded
    with sharded_session(shards) as session, recording(shards) as log:
        with pytest.raises(ShardRoutingError, match="on_all_shards"):
            session.scalar(select(func.count()).select_from(Order))
        with pytest.raises(ShardRoutingError):
            session.execute(text("SELECT count(*) FROM orders"))
        with pytest.raises(ShardRoutingError):
            session.scalars(select(Order).order_by(Order.id.desc()).limit(5)).all()
        assert log.count() == 0
    with sharded_session(shards, strict=False) as session:
        per_shard = session.execute(select(func.count()).select_from(Order)).scalars().all()
        assert len(per_shard) == 4 and sum(per_shard) == 200  # unmerged, as asked


@pytest.mark.parametrize(
    ("statement", "match"),
    [
        (lambda: select(Order.id, func.row_number().over(order_by=Order.id)), "window"),
        (lambda: select(func.sum(Order.id) / func.count()), "sum\\(\\) inside an expression"),
        (lambda: select(func.string_agg(Order.customer, ",")), "string_agg"),
        (lambda: select(Order).order_by(func.length(Order.customer)), "ORDER BY"),
    ],
)
def test_what_cannot_be_merged_is_refused_before_running(
    statement: object, match: str, loaded: tuple[dict[str, Engine], Engine]
) -> None:
    shards, _ = loaded
    with sharded_session(shards) as session, recording(shards) as log:
        with pytest.raises(UnmergeableQueryError, match=match):
            session.on_all_shards(statement())  # type: ignore[operator]
        assert log.count() == 0


def test_column_fan_outs_run_on_every_shard_at_once_when_nothing_was_written(
    loaded: tuple[dict[str, Engine], Engine],
) -> None:
    """Which thread ran each shard's statement tells parallel from sequential."""
    shards, _ = loaded
    threads: list[tuple[str, str]] = []

    def note(name: str) -> Any:
        def before(*args: Any) -> None:
            threads.append((name, threading.current_thread().name))

        return before

    hooks = {name: note(name) for name in shards}
    for name, engine in shards.items():
        event.listen(engine, "before_cursor_execute", hooks[name])
    try:
        server = next(iter(shards.values())).dialect.name != "sqlite"
        with sharded_session(shards) as session:
            count = select(func.count()).select_from(Order)
            assert session.on_all_shards(count).scalar() == 200
            in_pool = {n for n, t in threads if t.startswith("uid_fields-fanout")}
            assert in_pool == (set(SHARDS) if server else set())
            threads.clear()
            orders = session.on_all_shards(select(Order).limit(3)).scalars().all()
            assert all(o in session for o in orders)  # objects: into the session
            # Each under its shard's identity key: get() finds it in the session.
            assert all(
                inspect(o).key[2] in SHARDS and session.get(Order, o.id) is o for o in orders
            )
            in_pool = {n for n, t in threads if t.startswith("uid_fields-fanout")}
            assert in_pool == (set(SHARDS) if server else set())
            threads.clear()
            with_options = select(Order).options(selectinload(Order.items)).limit(3)
            assert len(session.on_all_shards(with_options).scalars().all()) == 3
            assert not any(t.startswith("uid_fields-fanout") for _, t in threads)
            session.add(Order(customer="pending"))
            session.flush()
            threads.clear()
            assert session.on_all_shards(count).scalar() == 201  # sees its own write
            assert not any(t.startswith("uid_fields-fanout") for _, t in threads)
            session.rollback()
            assert session.on_all_shards(count).scalar() == 200
            bulk_insert(session, Order, [{"customer": "bulk"}] * 8)  # not committed yet
            assert session.on_all_shards(count).scalar() == 208  # on its connections
            session.rollback()
    finally:
        for name, engine in shards.items():
            event.remove(engine, "before_cursor_execute", hooks[name])
        parallel.shutdown()
