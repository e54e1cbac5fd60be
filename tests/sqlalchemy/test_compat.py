"""The private SQLAlchemy API the adapter relies on reads as expected in the installed
SQLAlchemy: a release that changes one fails here, by name."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session, joinedload

from uid_fields.sqlalchemy import compat

from .models import Base, Order

pytestmark = pytest.mark.versions


def test_select_parts_reads_every_clause() -> None:
    statement = (
        select(Order.customer)
        .group_by(Order.customer)
        .distinct()
        .order_by(Order.customer)
        .limit(5)
        .offset(2)
    )
    parts = compat.select_parts(statement)
    assert len(parts.order_by) == 1 and len(parts.group_by) == 1
    assert parts.distinct and parts.limit == 5 and parts.offset == 2 and parts.has_window
    plain = compat.select_parts(select(Order))
    assert plain.order_by == [] and plain.group_by == [] and not plain.distinct
    assert plain.limit is None and plain.offset is None and not plain.has_window


def test_for_update_is_seen() -> None:
    assert compat.is_plain_select(select(Order))
    assert not compat.is_plain_select(select(Order).with_for_update())


def test_frozen_rows_round_trip() -> None:
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        session.execute(Order.__table__.insert(), [{"id": i, "customer": "c"} for i in (1, 2)])
        frozen = session.execute(select(Order.id).order_by(Order.id)).freeze()
        assert [tuple(r) for r in compat.frozen_rows(frozen)] == [(1,), (2,)]
        result = compat.result_of(frozen, list(reversed(compat.frozen_rows(frozen))))
        assert [r.id for r in result] == [2, 1]


def test_streamed_rows_round_trip() -> None:
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        session.execute(Order.__table__.insert(), [{"id": i, "customer": "c"} for i in (1, 2)])
        objects = session.execute(
            select(Order).order_by(Order.id), execution_options={"yield_per": 1}
        )
        rows = list(reversed(list(compat.stream_rows(objects))))
        assert [o.id for o in rows] == [2, 1]  # the objects of a one-entity result
        result = compat.streamed_result(objects, iter(rows))
        assert [o.id for o in result.scalars()] == [2, 1]
        columns = session.execute(select(Order.id, Order.customer).order_by(Order.id))
        rows = list(reversed(list(compat.stream_rows(columns))))
        assert [tuple(r) for r in compat.streamed_result(columns, iter(rows))] == [
            (2, "c"),
            (1, "c"),
        ]


def test_legacy_get_arguments_are_what_query_get_hands_the_session() -> None:
    engine = create_engine("sqlite://")
    with Session(engine) as session:
        query = (
            session.query(Order)
            .options(joinedload(Order.items))
            .populate_existing()
            .with_for_update(nowait=True)
            .execution_options(_sa_shard_id="shard_1")
        )
        mapper, arguments = compat.legacy_get_arguments(query)
        assert mapper is Order.__mapper__
        assert len(arguments["options"]) == 1 and arguments["populate_existing"] is True
        assert arguments["with_for_update"].nowait
        assert arguments["execution_options"][compat.SHARD_ID_OPTION] == "shard_1"
        plain = compat.legacy_get_arguments(session.query(Order))[1]
        assert plain["options"] == [] and plain["with_for_update"] is None
        assert not plain["populate_existing"]
