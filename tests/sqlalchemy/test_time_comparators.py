"""``Model.id.time``: time predicates compiled to integer bounds on the id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from uid_fields import ManualClock, SnowflakeGenerator
from uid_fields.sqlalchemy import bulk_insert, sharded_session

from .conftest import recording
from .models import EPOCH_MS, ORDER_LAYOUT, Order

pytestmark = pytest.mark.versions

START_MS = EPOCH_MS + 86_400_000 * 400


def _literal(statement: object) -> str:
    return str(statement.compile(compile_kwargs={"literal_binds": True}))  # type: ignore[attr-defined]


def test_compiles_to_integer_bounds() -> None:
    at = datetime(2025, 6, 1, tzinfo=UTC)
    sql = _literal(select(Order.id).where(Order.id.time >= at))
    assert f"orders.id >= {ORDER_LAYOUT.min_id(at)}" in sql
    sql = _literal(select(Order.id).where(Order.id.time.between(at, at + timedelta(days=1))))
    low, high = ORDER_LAYOUT.min_id(at), ORDER_LAYOUT.max_id(at + timedelta(days=1))
    assert f"orders.id >= {low} AND orders.id <= {high}" in sql
    assert f"orders.id < {low}" in _literal(select(Order.id).where(Order.id.time < at))
    assert f"orders.id > {ORDER_LAYOUT.max_id(at)}" in _literal(
        select(Order.id).where(Order.id.time > at)
    )


@pytest.mark.parametrize(
    ("instant", "op", "always"),
    [
        (datetime(2000, 1, 1, tzinfo=UTC), ">=", True),
        (datetime(2000, 1, 1, tzinfo=UTC), ">", True),
        (datetime(2000, 1, 1, tzinfo=UTC), "<", False),
        (datetime(2000, 1, 1, tzinfo=UTC), "<=", False),
        (datetime(2200, 1, 1, tzinfo=UTC), ">=", False),
        (datetime(2200, 1, 1, tzinfo=UTC), ">", False),
        (datetime(2200, 1, 1, tzinfo=UTC), "<", True),
        (datetime(2200, 1, 1, tzinfo=UTC), "<=", True),
    ],
)
def test_instants_outside_the_lifetime_never_give_out_of_range_literals(
    instant: datetime, op: str, always: bool
) -> None:
    time = Order.id.time
    condition = {
        ">=": time >= instant,
        ">": time > instant,
        "<": time < instant,
        "<=": time <= instant,
    }[op]
    sql = _literal(select(Order.id).where(condition))
    assert str(2**63) not in sql and "-1" not in sql
    assert (
        ("orders.id IS NOT NULL" in sql) if always else ("false" in sql.lower() or "0 = 1" in sql)
    )


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        Order.id.time >= datetime(2025, 1, 1)  # noqa: B015


def test_returns_exactly_the_rows_of_the_range(shards: dict[str, Engine]) -> None:
    clock = ManualClock(START_MS)
    generator = SnowflakeGenerator(ORDER_LAYOUT, datacenter=0, worker=7, clock=clock)
    rows = []
    for minute in range(10):
        clock.set_ms(START_MS + minute * 60_000)
        rows += [{"id": i, "customer": str(minute)} for i in generator.next_ids(3)]
    with sharded_session(shards) as session:
        bulk_insert(session, Order, rows)
        session.commit()

    def at(minute: int) -> datetime:
        return datetime.fromtimestamp((START_MS + minute * 60_000) / 1000, UTC)

    with sharded_session(shards) as session, recording(shards) as log:
        since = session.on_all_shards(select(Order).where(Order.id.time >= at(4))).scalars().all()
        assert sorted({o.customer for o in since}) == [str(m) for m in range(4, 10)]
        assert len(since) == 18
        executed = log.sql("SELECT")
        assert any(f">= {ORDER_LAYOUT.min_id(at(4))}" in s for s in executed)  # inlined
        window = (
            session.on_all_shards(select(Order).where(Order.id.time.between(at(2), at(3))))
            .scalars()
            .all()
        )
        assert sorted(o.customer for o in window) == ["2"] * 3 + ["3"] * 3
        before = session.on_all_shards(select(Order).where(Order.id.time < at(1))).scalars().all()
        assert [o.customer for o in before] == ["0"] * 3
        exact = session.on_all_shards(select(Order).where(Order.id.time == at(5))).scalars().all()
        assert len(exact) == 3
