"""A session's ``do_orm_execute`` hooks (a ``with_loader_criteria`` filter, a soft-delete
rule) hold for a fan-out whichever way it reads the shards: a read on connections of
the fan-out's own would never pass through them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import ORMExecuteState, with_loader_criteria

from uid_fields.sqlalchemy import sharded_session

from .conftest import postgres_orders
from .models import Order

pytestmark = pytest.mark.versions


@pytest.fixture
def pg(postgres_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    with postgres_orders(postgres_engines, [f"c{i % 2}" for i in range(40)]) as engines:
        yield engines


def _hide_c0(state: ORMExecuteState) -> None:
    if state.is_select:
        state.statement = state.statement.options(
            with_loader_criteria(Order, Order.customer != "c0")
        )


@pytest.mark.parametrize(
    "statement",
    [select(Order), select(Order.id, Order.customer), select(Order).execution_options(x=1)],
    ids=["objects", "columns", "objects-with-options"],
)
def test_a_session_hook_filters_the_fan_out(pg: dict[str, Engine], statement: Any) -> None:
    with sharded_session(pg) as session:
        event.listen(session, "do_orm_execute", _hide_c0)
        rows = session.on_all_shards(statement).all()
    customers = {row[0].customer if len(row) == 1 else row.customer for row in rows}
    assert customers == {"c1"}
    assert len(rows) == 20
