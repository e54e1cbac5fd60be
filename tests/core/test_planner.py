"""The core fan-out planner and combiner, against the databases whose answers they repeat."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import services
from uid_fields.errors import UnmergeableQueryError
from uid_fields.ops.combine import average, combine
from uid_fields.ops.merge import code_point_ranks
from uid_fields.ops.planner import Condition, Ordering, Output, Statement, plan


def test_a_refused_construct_is_named_before_anything_runs() -> None:
    with pytest.raises(UnmergeableQueryError, match="a window function"):
        plan(Statement((Output("id"),), refused=("a window function (OVER)",)))
    with pytest.raises(UnmergeableQueryError, match="string_agg"):
        plan(Statement((Output("t", aggregate="string_agg"),)))
    with pytest.raises(UnmergeableQueryError, match="neither grouped by nor aggregated"):
        plan(Statement((Output("t"), Output("n", aggregate="count")), group_by=()))


def test_plans_name_what_each_shard_runs() -> None:
    rows = plan(Statement((Output("id"),), order=(Ordering(0),), limit=5, offset=10))
    assert (rows.kind, rows.limit, rows.window) == ("rows", 15, (10, 5))
    groups = plan(
        Statement(
            (Output("k"), Output("a", aggregate="avg"), Output("d", "count", distinct=True)),
            group_by=(0,),
        )
    )
    assert groups.kind == "groups"
    assert [(c.output, c.role) for c in groups.columns] == [
        (0, "value"),
        (1, "sum"),
        (1, "count"),
        (2, "argument"),
    ]
    assert groups.group_by == (0, 3) and groups.bound is not None


def _split(rows: list[tuple[Any, ...]], shards: int) -> list[list[tuple[Any, ...]]]:
    return [rows[i::shards] for i in range(shards)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.one_of(st.none(), st.integers(-50, 50))),
        max_size=40,
    ),
    st.integers(1, 4),
    st.integers(0, 6),
)
def test_groups_combine_as_one_sqlite_database_groups(
    rows: list[tuple[str, int | None]], shards: int, having: int
) -> None:
    """Each 'shard' is an in-memory SQLite database; the reference holds every row."""

    def database(part: list[tuple[str, int | None]]) -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:")
        connection.execute("CREATE TABLE t (k TEXT, v INTEGER)")
        connection.executemany("INSERT INTO t VALUES (?, ?)", part)
        return connection

    statement = Statement(
        (
            Output("k"),
            Output("n", "count"),
            Output("s", "sum"),
            Output("lo", "min"),
            Output("a", "avg"),
            Output("d", "count", distinct=True),
        ),
        group_by=(0,),
        order=(Ordering(0),),
        having=Condition(">", (("output", 1), ("value", having))),
    )
    planned = plan(statement)
    select = "SELECT k, count(*), sum(v), min(v), sum(v), count(v), v FROM t GROUP BY k, v"
    parts = [list(database(part).execute(select)) for part in _split(rows, shards)]
    got = combine(planned, parts, "sqlite", text_ranks=lambda key, texts: code_point_ranks(texts))
    expected = list(
        database(rows).execute(
            "SELECT k, count(*), sum(v), min(v), avg(v), count(DISTINCT v) FROM t "
            f"GROUP BY k HAVING count(*) > {having} ORDER BY k"
        )
    )
    assert got == expected


@pytest.fixture(scope="module", params=["postgresql", "mysql", "sqlite"])
def averager(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[list[Any]], Any]]]:
    """The backend's own AVG of a list of values."""
    vendor = request.param
    if vendor == "sqlite":
        connection: Any = sqlite3.connect(":memory:")
        placeholder, table = "?", "CREATE TABLE avg_values (v INTEGER)"
    elif vendor == "postgresql":
        connection = services.postgres_connection()
        connection.autocommit = True
        placeholder, table = "%s", "CREATE TEMP TABLE avg_values (v NUMERIC)"
    else:
        connection = services.mysql_connection()
        placeholder, table = "%s", "CREATE TEMPORARY TABLE avg_values (v DECIMAL(30, 2))"
        name = services.database_name("uidf_core_avg", 0)
        with connection.cursor() as setup:
            setup.execute(f"CREATE DATABASE IF NOT EXISTS {name}")
            setup.execute(f"USE {name}")
    cursor = connection.cursor()
    cursor.execute(table)

    def avg(values: list[Any]) -> Any:
        cursor.execute("DELETE FROM avg_values")
        cursor.executemany(f"INSERT INTO avg_values VALUES ({placeholder})", [(v,) for v in values])
        cursor.execute("SELECT avg(v), sum(v) FROM avg_values")
        return cursor.fetchone()

    yield vendor, avg
    if vendor == "mysql":
        cursor.execute(f"DROP DATABASE IF EXISTS {services.database_name('uidf_core_avg', 0)}")
    connection.close()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(-(10**9), 10**9),
            st.decimals(min_value=-1000, max_value=1000, places=2, allow_nan=False),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_average_is_the_backends_own_division(
    averager: tuple[str, Callable[[list[Any]], Any]], values: list[Any]
) -> None:
    """AVG over shards is SUM / COUNT divided as the backend divides, digit for digit."""
    vendor, avg = averager
    if vendor == "sqlite":
        values = [int(v) for v in values]
    expected, total = avg(values)
    got = average(total, len(values), vendor)
    assert got == expected and str(got) == str(expected)
    if isinstance(expected, Decimal):
        assert isinstance(got, Decimal)
