"""The private SQLAlchemy API the adapter relies on reads as expected in the installed
SQLAlchemy: a release that changes one fails here, by name."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.ext.horizontal_shard import ShardedSession
from sqlalchemy.orm import Session, joinedload

from tests import private_api
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


#: The adapter's own private names that SQLAlchemy's source happens to define too; each
#: is reached on ``self`` only, in a class of the adapter that defines it.
OWN_NAMES = {
    "_compare",
    "_connection",
    "_parent",
    "_parents",
    "_resolve",
    "_rows",
    "_values",
}


def test_no_private_sqlalchemy_name_is_reached_outside_compat() -> None:
    allowed = set(compat.DOCUMENTED_UNDERSCORE_API)
    assert private_api.offenders("sqlalchemy", "sqlalchemy", allowed, OWN_NAMES) == []


def test_the_adapters_own_names_are_its_own() -> None:
    assert private_api.names_defined(private_api.PACKAGE / "sqlalchemy") >= OWN_NAMES
    assert private_api.own_reaches_not_on_self("sqlalchemy", OWN_NAMES) == []
    assert not OWN_NAMES & set(compat.PRIVATE_API)


def test_every_private_name_compat_reaches_is_listed() -> None:
    private = private_api.framework_private_names("sqlalchemy")
    reached = {r.name for r in private_api.compat_reaches("sqlalchemy") if r.name in private}
    assert reached - set(compat.PRIVATE_API) == set()


def _holders() -> dict[tuple[str, ...], list[Any]]:
    """An object of each kind whose private names compat lists."""
    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    session = Session(engine)
    statement = select(Order)
    result = session.execute(select(Order.id))
    return {
        compat.PRIVATE_SELECT_API: [statement],
        compat.PRIVATE_QUERY_API: [session.query(Order)],
        compat.PRIVATE_LOAD_OPTIONS_API: [session.query(Order).load_options],
        compat.PRIVATE_COMPILED_API: [statement.compile(dialect=engine.dialect)],
        compat.PRIVATE_TYPE_API: [Order.__table__.c.id.type],
        compat.PRIVATE_RESULT_API: [result],
        compat.PRIVATE_RESULT_METADATA_API: [result._metadata],
        compat.PRIVATE_SESSION_API: [session],
        compat.PRIVATE_SHARDED_SESSION_API: [ShardedSession],
        compat.PRIVATE_SHARDED_SESSION_INSTANCE_API: [
            ShardedSession(
                shard_chooser=lambda *args, **kwargs: "a",
                identity_chooser=lambda *args, **kwargs: ["a"],
                execute_chooser=lambda *args, **kwargs: ["a"],
                shards={"a": engine},
            )
        ],
        compat.PRIVATE_ELEMENT_API: [Order.__table__.c.id],
    }


@pytest.mark.parametrize("name", compat.PRIVATE_API)
def test_each_private_name_exists(name: str) -> None:
    holders = [h for names, found in _holders().items() if name in names for h in found]
    assert holders and all(hasattr(h, name) for h in holders), (
        f"{name} is gone: update uid_fields/sqlalchemy/compat.py"
    )
