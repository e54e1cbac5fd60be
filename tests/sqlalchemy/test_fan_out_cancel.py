"""A fan-out past its deadline cancels its queries on the server: the request that gave
up leaves no backend working for it (psycopg's cancel request, then the connection is
discarded). Both fan-out paths: the statement sent to every shard at once from one
thread, and the pool's threads (an ORM statement)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import Engine

from tests import services
from uid_fields import FanOutTimeoutError
from uid_fields.sqlalchemy import sharded_session

from .conftest import postgres_orders
from .models import Order


@pytest.fixture
def orders(postgres_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    with postgres_orders(postgres_engines, [f"c{i}" for i in range(8)]) as engines:
        yield engines


def still_running(marker: str) -> list[str]:
    """The databases where a query carrying ``marker`` is still active."""
    with services.postgres_connection() as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s "
            "AND pid <> pg_backend_pid()",
            (f"%{marker}%",),
        ).fetchall()
    return sorted(str(row[0]) for row in rows)


def wait_until_idle(marker: str, seconds: float = 5.0) -> list[str]:
    """Polls for a while: a cancel request takes a moment to reach the backend."""
    deadline = time.monotonic() + seconds
    while (running := still_running(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


@pytest.mark.parametrize("shape", ["columns", "objects"])
def test_a_postgresql_fan_out_past_its_deadline_leaves_no_query_running(
    orders: dict[str, Engine], shape: str
) -> None:
    marker = f"uidf_cancel_{uuid.uuid4().hex[:8]}"
    slow = text(f"(SELECT true FROM pg_sleep(30)) /* {marker} */")
    statement = (select(Order.id) if shape == "columns" else select(Order)).where(slow)
    with (
        sharded_session(orders, fan_out_timeout=0.5) as session,
        pytest.raises(FanOutTimeoutError) as raised,
    ):
        session.on_all_shards(statement).all()
    assert raised.value.shards  # the shards that did not answer are named
    assert wait_until_idle(marker) == []
