"""The PostgreSQL next_id function: schema pinning and the end of the layout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests import services
from uid_fields import INSTAGRAM, SnowflakeLayout
from uid_fields.sql.postgres import NextIdFunction


@pytest.fixture
def schema() -> Iterator[tuple[object, str]]:
    admin = services.postgres_connection()
    name = f"uidf_shard_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE SCHEMA {name}")
    yield admin, name
    admin.execute(f"DROP SCHEMA {name} CASCADE")
    admin.close()


def test_a_function_in_its_own_schema_works_whatever_the_callers_search_path(
    schema: tuple[object, str],
) -> None:
    admin, name = schema
    function = NextIdFunction(INSTAGRAM, shard=5, name="next_id")
    admin.execute(f"SET search_path = {name}")  # type: ignore[attr-defined]
    for statement in function.create_statements():
        admin.execute(statement)  # type: ignore[attr-defined]
    caller = services.postgres_connection()
    try:
        caller.execute("SET search_path = public")
        made = [caller.execute(f"SELECT {name}.next_id()").fetchone()[0] for _ in range(5)]
        by_shard = caller.execute(f"SELECT {name}.next_id(9)").fetchone()[0]
    finally:
        caller.close()
    assert len(set(made)) == 5 and {INSTAGRAM.decompose(i).shard for i in made} == {5}
    assert INSTAGRAM.decompose(by_shard).shard == 9


def test_a_call_past_the_layouts_end_leaves_the_state_untouched(
    schema: tuple[object, str],
) -> None:
    admin, name = schema
    # Two bits of 1 s units from an epoch 10 s ago: the layout ended 6 s ago.
    import time

    epoch_ms = int(time.time() * 1000) - 10_000
    tiny = SnowflakeLayout(
        epoch_ms=epoch_ms, time_bits=2, time_unit_ms=1000, fields=(("shard", 3),), sequence_bits=4
    )
    function = NextIdFunction(tiny, shard=1, name="next_id")
    admin.execute(f"SET search_path = {name}")  # type: ignore[attr-defined]
    for statement in function.create_statements():
        admin.execute(statement)  # type: ignore[attr-defined]
    before = admin.execute("SELECT last_value FROM next_id_state").fetchone()[0]  # type: ignore[attr-defined]
    for _ in range(2):
        with pytest.raises(Exception, match="exhausted"):
            admin.execute("SELECT next_id()")  # type: ignore[attr-defined]
    after = admin.execute("SELECT last_value FROM next_id_state").fetchone()[0]  # type: ignore[attr-defined]
    assert after == before  # nothing stored that a later call would trip over
