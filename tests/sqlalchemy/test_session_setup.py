"""A session per request builds nothing its engines already have: the router, the write
guards and the routing listener are made once per set of engines (or once per class),
and every session routes, guards and runs its hooks as before."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import BigInteger, Column, ForeignKey, MetaData, Table, create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.horizontal_shard import execute_and_instances
from sqlalchemy.orm import ORMExecuteState

from uid_fields.sqlalchemy import (
    SnowflakeField,
    check_writes,
    sharded_session,
    sharded_sessionmaker,
)
from uid_fields.sqlalchemy.guard import guard_changes, guard_router
from uid_fields.sqlalchemy.session import FAN_OUT

from .conftest import SHARDS
from .models import Order, order_ids

pytestmark = pytest.mark.versions


def test_sessions_over_the_same_engines_share_their_router_and_guards(
    sqlite_engines: dict[str, Engine],
) -> None:
    with sharded_session(sqlite_engines) as first:
        router = first.router
    guards = {name: guard_router(engine) for name, engine in sqlite_engines.items()}
    changes = guard_changes()
    with sharded_session(dict(sqlite_engines)) as second:
        assert second.router is router  # no new router
    assert {name: guard_router(e) for name, e in sqlite_engines.items()} == guards
    assert guard_changes() == changes  # no guard built or replaced
    # Other settings over the same engines are another router.
    with sharded_session(sqlite_engines, default_shard="shard_1") as other:
        assert other.router is not router and other.router.default_shard == "shard_1"
        assert not sharded_session(sqlite_engines).router.default_shard


def test_a_session_registers_no_listener_of_its_own(sqlite_engines: dict[str, Engine]) -> None:
    with sharded_session(sqlite_engines) as session:
        assert not event.contains(session, "do_orm_execute", execute_and_instances)


def test_guards_given_another_shard_are_put_back(sqlite_engines: dict[str, Engine]) -> None:
    sharded_session(sqlite_engines).close()
    check_writes({"alone": sqlite_engines["shard_0"]})  # shard_0's guard: another shard
    assert guard_router(sqlite_engines["shard_0"]).shard_names == ["alone"]  # type: ignore[union-attr]
    sharded_session(sqlite_engines).close()
    router = guard_router(sqlite_engines["shard_0"])
    assert router is not None and router.shard_names == SHARDS


def test_engines_are_not_kept_alive(tmp_path: Path) -> None:
    engines = {f"s{i}": create_engine(f"sqlite:///{tmp_path / str(i)}.db") for i in range(2)}
    sharded_session(engines).close()
    gone = [weakref.ref(engine) for engine in engines.values()]
    del engines
    gc.collect()
    assert [ref() for ref in gone] == [None, None]


def _count_calls(calls: list[str]) -> Any:
    def hook(state: ORMExecuteState) -> None:
        calls.append(str(state.bind_arguments.get("shard_id")))

    return hook


def test_hooks_run_where_they_ran(shards: dict[str, Engine]) -> None:
    """A hook of the session class or its sessionmaker runs once, before the statement
    goes to its shards; a hook of the session itself runs for each shard (where
    ShardedSession's listener of each instance put them)."""
    statement = select(Order).execution_options(**{FAN_OUT: True})
    maker = sharded_sessionmaker(shards)
    before: list[str] = []
    event.listen(maker, "do_orm_execute", _count_calls(before))
    with maker() as session:
        session.execute(statement).all()
    assert before == ["None"]
    each: list[str] = []
    with sharded_session(shards) as session:
        event.listen(session, "do_orm_execute", _count_calls(each))
        session.execute(statement).all()
    assert each == SHARDS
    both: list[str] = []
    with maker() as session:
        event.listen(session, "do_orm_execute", _count_calls(both))
        session.execute(statement).all()
    assert both == SHARDS and before == ["None", "None"]
    # A hook given to a sessionmaker whose sessions were built already holds for the next.
    later = sharded_sessionmaker(shards)
    later().close()
    once: list[str] = []
    event.listen(later, "do_orm_execute", _count_calls(once))
    with later() as session:
        session.execute(statement).all()
    assert once == ["None"]


def test_sessions_of_one_maker_route_and_write(shards: dict[str, Engine]) -> None:
    maker = sharded_sessionmaker(shards)
    ids = []
    for _ in range(3):  # one session per request
        with maker() as session:
            order = Order(customer="c")
            session.add(order)
            session.commit()
            ids.append((order.id, session.shard_of(order)))
    for value, shard in ids:
        with maker() as session:
            found = session.get(Order, value)
            assert found is not None and session.shard_of(found) == shard


def test_a_parent_table_added_later_routes_the_next_session(
    sqlite_engines: dict[str, Engine],
) -> None:
    """A table whose foreign key names a table not in the metadata yet is routed again
    by the next session, once that table exists (as each session's own router did)."""
    metadata = MetaData()
    child = Table(
        "late_children",
        metadata,
        Column("id", BigInteger, primary_key=True),
        Column("parent_id", BigInteger, ForeignKey("late_parents.id")),
    )
    with sharded_session(sqlite_engines) as session:
        assert session.router.table_route(child) is None
    Table(
        "late_parents", metadata, SnowflakeField("id", generator=order_ids, primary_key=True).column
    )
    with sharded_session(sqlite_engines) as session:
        route = session.router.table_route(child)
        assert route is not None and route.by_parent
