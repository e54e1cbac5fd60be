"""The PostgreSQL next_id function: schema pinning and the end of the layout."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests import services
from uid_fields import INSTAGRAM, SnowflakeLayout
from uid_fields.sql.postgres import NextIdFunction

pytestmark = pytest.mark.postgres


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
    # Found through names qualified at install time, not a search_path switched on every
    # call (that switch cost a third of the call).
    configs = admin.execute(  # type: ignore[attr-defined]
        "SELECT proconfig FROM pg_proc WHERE pronamespace = %s::regnamespace", [name]
    ).fetchall()
    assert len(configs) == 4 and all(c[0] is None for c in configs)


def test_a_schema_whose_name_needs_quotes_works_too() -> None:
    admin = services.postgres_connection()
    name = f"Shard {uuid.uuid4().hex[:6]}"
    admin.execute(f'CREATE SCHEMA "{name}"')
    try:
        admin.execute(f'SET search_path = "{name}"')
        for statement in NextIdFunction(INSTAGRAM, shard=3).create_statements():
            admin.execute(statement)
        admin.execute("SET search_path = public")
        made = admin.execute(f'SELECT "{name}".uid_next_id()').fetchone()[0]
        assert INSTAGRAM.decompose(made).shard == 3
    finally:
        admin.execute(f'DROP SCHEMA "{name}" CASCADE')
        admin.close()


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


# -- bad clocks: a wild reading ahead, and a state that got ahead ------------------------

DAY_MS = 86_400_000


def _install(admin: object, name: str, **options: object) -> NextIdFunction:
    function = NextIdFunction(INSTAGRAM, shard=3, name="next_id", **options)  # type: ignore[arg-type]
    admin.execute(f"SET search_path = {name}")  # type: ignore[attr-defined]
    for statement in function.create_statements():
        admin.execute(statement)  # type: ignore[attr-defined]
    return function


def _shift_clock(admin: object, ms: int) -> None:
    """Replace the function's clock by one ``ms`` ahead of the real one."""
    admin.execute(  # type: ignore[attr-defined]
        "CREATE OR REPLACE FUNCTION next_id_clock() RETURNS bigint LANGUAGE sql AS "
        f"$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + {ms} $$"
    )


def _age_ms(value: int) -> float:
    import time

    return time.time() * 1000 - INSTAGRAM.decompose(value).timestamp_ms


def test_a_reading_a_day_ahead_is_refused_and_later_ids_stay_on_time(
    schema: tuple[object, str],
) -> None:
    import psycopg

    admin, name = schema
    _install(admin, name)
    first = admin.execute("SELECT next_id()").fetchone()[0]  # type: ignore[attr-defined]
    _shift_clock(admin, DAY_MS)
    with pytest.raises(psycopg.errors.DatetimeFieldOverflow, match="max_ahead_ms"):
        admin.execute("SELECT next_id()")  # type: ignore[attr-defined]
    _shift_clock(admin, 0)  # the clock is right again
    later = admin.execute("SELECT next_id()").fetchone()[0]  # type: ignore[attr-defined]
    assert later > first and abs(_age_ms(later)) < 60_000  # not stamped a day ahead


def test_an_idle_database_takes_the_time_that_passed(schema: tuple[object, str]) -> None:
    admin, name = schema
    _install(admin, name)
    # The last id was issued two days ago (the shard was idle since).
    admin.execute("SELECT next_id()")  # type: ignore[attr-defined]
    last = admin.execute("SELECT last_value FROM next_id_state").fetchone()[0]  # type: ignore[attr-defined]
    two_days_units = 2 * DAY_MS // INSTAGRAM.time_unit_ms
    admin.execute(  # type: ignore[attr-defined]
        f"SELECT setval('next_id_state', {last - (two_days_units << INSTAGRAM.sequence_bits)})"
    )
    made = admin.execute("SELECT next_id()").fetchone()[0]  # type: ignore[attr-defined]
    assert abs(_age_ms(made)) < 60_000


def test_the_bound_is_configurable_and_can_be_off(schema: tuple[object, str]) -> None:
    admin, name = schema
    _install(admin, name, max_ahead_ms=None)
    admin.execute("SELECT next_id()")  # type: ignore[attr-defined]
    _shift_clock(admin, DAY_MS)
    made = admin.execute("SELECT next_id()").fetchone()[0]  # type: ignore[attr-defined]
    assert _age_ms(made) < -DAY_MS + 60_000  # accepted: stamped a day ahead
    with pytest.raises(ValueError, match="max_ahead_ms"):
        NextIdFunction(INSTAGRAM, shard=3, max_ahead_ms=0)


def test_a_state_that_ran_ahead_is_reset_only_when_no_stored_id_is_later(
    schema: tuple[object, str],
) -> None:
    admin, name = schema
    function = _install(admin, name, max_ahead_ms=None)
    admin.execute("CREATE TABLE photos (id bigint PRIMARY KEY DEFAULT next_id())")  # type: ignore[attr-defined]
    admin.execute("INSERT INTO photos DEFAULT VALUES")  # type: ignore[attr-defined]
    _shift_clock(admin, DAY_MS)  # a clock a day ahead for a while: ids issued, not stored
    admin.execute("SELECT next_id() FROM generate_series(1, 10)")  # type: ignore[attr-defined]
    _shift_clock(admin, 0)
    cursor = admin.cursor()  # type: ignore[attr-defined]
    state = function.check_state(cursor, ["photos"])
    assert DAY_MS - 60_000 < state.ahead_ms <= DAY_MS + 1000 and state.resettable
    after = function.reset_state(cursor, ["photos"])
    assert after.ahead_ms == 0
    made = admin.execute("INSERT INTO photos DEFAULT VALUES RETURNING id").fetchone()[0]  # type: ignore[attr-defined]
    assert abs(_age_ms(made)) < 60_000
    # A stored id from the future: resetting could issue it again, so it is refused.
    _shift_clock(admin, DAY_MS)
    admin.execute("INSERT INTO photos DEFAULT VALUES")  # type: ignore[attr-defined]
    _shift_clock(admin, 0)
    assert not function.check_state(cursor, ["photos"]).resettable
    with pytest.raises(ValueError, match="could issue them again"):
        function.reset_state(cursor, ["photos"])


# -- the common case writes nothing durable ----------------------------------------------


def _fix_clock(admin: object, unix_ms: int) -> None:
    """Replace the function's clock by one that always reads ``unix_ms``."""
    admin.execute(  # type: ignore[attr-defined]
        "CREATE OR REPLACE FUNCTION next_id_clock() RETURNS bigint LANGUAGE sql AS "
        f"$$ SELECT {unix_ms}::bigint $$"
    )


def test_ids_within_a_reserved_range_write_nothing_durable(schema: tuple[object, str]) -> None:
    """The state sequence is written only when the clock passes what it reserved: a
    setval per id gave every transaction an xid, so each commit waited for a WAL flush.
    With the clock held still, 3000 ids (carried into the next milliseconds as each
    one's 1024 are used) neither assign an xid nor move the state sequence."""
    import time

    admin, name = schema
    _install(admin, name)
    _fix_clock(admin, int(time.time() * 1000))
    first = admin.execute("SELECT next_id()").fetchone()[0]  # type: ignore[attr-defined]
    state = admin.execute("SELECT last_value FROM next_id_state").fetchone()[0]  # type: ignore[attr-defined]
    with admin.transaction():  # type: ignore[attr-defined]
        made = [
            row[0]
            for row in admin.execute(  # type: ignore[attr-defined]
                "SELECT next_id() FROM generate_series(1, 3000)"
            ).fetchall()
        ]
        xid = admin.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0]  # type: ignore[attr-defined]
    assert xid is None  # nothing durable written: the commit waits for no flush
    after = admin.execute("SELECT last_value FROM next_id_state").fetchone()[0]  # type: ignore[attr-defined]
    assert after == state
    ids = [first, *made]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # The state still bounds every id issued: a crash resumes above all of them.
    layout = INSTAGRAM
    assert all(
        (layout.decompose(i).timestamp_ms - layout.epoch_ms) // layout.time_unit_ms
        <= state >> layout.sequence_bits
        for i in ids
    )


def test_a_clock_that_goes_back_repeats_nothing(schema: tuple[object, str]) -> None:
    """NTP steps the clock back 5 s: the ids go on above the last one issued (a new block
    always starts above the last), and follow the clock again once it has caught up."""
    admin, name = schema
    _install(admin, name)
    first = [r[0] for r in admin.execute("SELECT next_id() FROM generate_series(1, 2000)")]  # type: ignore[attr-defined]
    _shift_clock(admin, -5000)
    back = [r[0] for r in admin.execute("SELECT next_id() FROM generate_series(1, 2000)")]  # type: ignore[attr-defined]
    _shift_clock(admin, 0)
    later = [r[0] for r in admin.execute("SELECT next_id() FROM generate_series(1, 2000)")]  # type: ignore[attr-defined]
    ids = first + back + later
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert abs(_age_ms(later[-1])) < 60_000


def test_the_first_id_after_a_quiet_spell_carries_the_clocks_time(
    schema: tuple[object, str],
) -> None:
    """The rest of an old millisecond's block is not handed out once the clock has
    passed it: the id is stamped with the reading, not with the block's time."""
    import time

    admin, name = schema
    _install(admin, name)
    now_ms = int(time.time() * 1000)
    for reading in (now_ms, now_ms + 1000, now_ms + 1001):
        _fix_clock(admin, reading)
        made = admin.execute("SELECT next_id()").fetchone()[0]  # type: ignore[attr-defined]
        assert INSTAGRAM.decompose(made).timestamp_ms == reading
