"""``session.begin_nested()``: a SAVEPOINT on every shard connection the block uses."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from uid_fields.sqlalchemy import sharded_session

from .conftest import recording
from .models import Order

pytestmark = pytest.mark.versions


def test_work_rolled_back_to_a_savepoint_is_not_committed(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session, recording(shards) as log:
        kept = [Order(customer="kept") for _ in range(8)]
        session.add_all(kept)
        session.flush()
        nested = session.begin_nested()
        dropped = [Order(customer="dropped") for _ in range(8)]
        session.add_all(dropped)
        session.flush()
        nested.rollback()
        session.commit()
        assert any("SAVEPOINT" in s.upper() for s in log.sql("SAVEPOINT"))
    with sharded_session(shards) as session:
        count = select(func.count()).select_from(Order)
        assert session.on_all_shards(count.where(Order.customer == "kept")).scalar() == 8
        assert session.on_all_shards(count.where(Order.customer == "dropped")).scalar() == 0


def test_a_released_savepoint_keeps_its_work(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        with session.begin_nested():
            session.add_all(Order(customer="nested") for _ in range(8))
        session.commit()
    with sharded_session(shards) as session:
        count = select(func.count()).select_from(Order).where(Order.customer == "nested")
        assert session.on_all_shards(count).scalar() == 8
