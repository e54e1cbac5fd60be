"""Fan-outs of a session whose transaction holds shard connections read every shard at
once and still see that transaction.

A shard the transaction began on is read on its connection (from this thread; a page of
objects is sent to all of them before any answer is read), the others on connections of
their own at the same time. The barrier (``tests.pg_barrier``) proves the overlap with
no clock: each shard's query waits until every shard's is running, and shards read one
after another time out there and return no rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine

from tests.pg_barrier import BARRIER_FUNCTION, barrier_sql, new_marker
from uid_fields.sqlalchemy import sharded_session

from .conftest import postgres_orders
from .models import Order


@pytest.fixture
def engines(postgres_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    customers = [f"c{i}" for i in range(40)]
    with postgres_orders(postgres_engines, customers) as engines:
        for engine in engines.values():
            with engine.begin() as connection:
                connection.execute(text(BARRIER_FUNCTION))
        yield engines


def _barrier(engines: dict[str, Engine]) -> object:
    return text(barrier_sql(new_marker(), len(engines)))


def test_a_session_that_already_read_fans_out_at_once(engines: dict[str, Engine]) -> None:
    with sharded_session(engines) as session:
        first = session.on_all_shards(select(Order.id).order_by(Order.id).limit(1)).scalar()
        session.get(Order, first)  # the usual request: one shard's query came first
        assert session.holds_shard_connections()
        page = select(Order).where(_barrier(engines)).order_by(Order.id.desc()).limit(100)
        assert len(session.on_all_shards(page).scalars().all()) == 40
        count = select(func.count()).select_from(Order).where(_barrier(engines))
        assert session.on_all_shards(count).scalar() == 40


def test_a_fan_out_sees_the_transactions_writes_on_every_shard(
    engines: dict[str, Engine],
) -> None:
    with sharded_session(engines) as session:
        made = [Order(customer="uncommitted") for _ in range(24)]
        session.add_all(made)
        session.flush()
        assert {session.shard_of(o) for o in made} == set(engines)
        wanted = select(Order).where(Order.customer == "uncommitted", _barrier(engines))
        page = session.on_all_shards(wanted.order_by(Order.id.desc()).limit(100))
        assert [o.id for o in page.scalars()] == sorted((o.id for o in made), reverse=True)
        ids = select(Order.id).where(Order.customer == "uncommitted", _barrier(engines))
        found = session.on_all_shards(ids.order_by(Order.id)).scalars().all()
        assert found == sorted(o.id for o in made)
        session.rollback()
