"""The opt-in C next_id (the ``uid_fields`` extension, ``postgres/uid_fields.c``) on a
server that preloads it and databases that have it.

The same promises as the PL/pgSQL function, checked on a throwaway cluster started with
``shared_preload_libraries``: no duplicate above 1024 ids per ms, none after a crash with
the clock set back, no lock left by a cancelled statement, no dependence on
``search_path``, clock faults refused, and either language replacing the other on a live
database without repeating an id.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.postgres_servers import PostgresCluster, c_library, create_extension, postgres_cluster
from uid_fields import INSTAGRAM, SnowflakeLayout
from uid_fields.sql.postgres import NextIdFunction

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    # The WAL writer waits 10 s between rounds: only an explicit flush makes a ceiling
    # durable before the crash test's transaction ends.
    with postgres_cluster(*c_library(), "wal_writer_delay=10000") as running:
        create_extension(running.database_url("template1"))  # in every database made here
        yield running


@pytest.fixture
def db(cluster: PostgresCluster) -> Iterator[str]:
    name = f"uidf_c_{uuid.uuid4().hex[:8]}"
    yield cluster.create_database(name)
    with psycopg.connect(cluster.url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def _install(url: str, **options: object) -> NextIdFunction:
    options = {"shard": 5, "language": "c", **options}
    function = NextIdFunction(INSTAGRAM, **options)  # type: ignore[arg-type]
    with _connect(url) as conn:
        for statement in function.create_statements():
            conn.execute(statement)
    return function


def _ids(conn: psycopg.Connection, count: int, call: str = "uid_next_id()") -> list[int]:
    rows = conn.execute(f"SELECT {call} FROM generate_series(1, {count})").fetchall()
    return [int(row[0]) for row in rows]


def _age_ms(value: int) -> float:
    return time.time() * 1000 - INSTAGRAM.decompose(value).timestamp_ms


def test_ids_are_unique_on_time_and_carry_the_shard(db: str) -> None:
    _install(db)
    with _connect(db) as conn:
        ids = _ids(conn, 200_000)  # far above 1024 per ms: the ids carry into later ms
        other = int(conn.execute("SELECT uid_next_id(9)").fetchone()[0])  # type: ignore[index]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    assert {INSTAGRAM.decompose(i).shard for i in ids} == {5}
    assert INSTAGRAM.decompose(other).shard == 9 and other > ids[-1]
    assert abs(_age_ms(ids[0])) < 60_000


def test_a_function_in_its_own_schema_works_whatever_the_callers_search_path(db: str) -> None:
    with _connect(db) as admin:
        admin.execute('CREATE SCHEMA "Shard 7"')
        admin.execute('SET search_path = "Shard 7"')
        for statement in NextIdFunction(INSTAGRAM, shard=7, language="c").create_statements():
            admin.execute(statement)
    with _connect(db) as caller:
        caller.execute("SET search_path = public")
        made = _ids(caller, 10, '"Shard 7".uid_next_id()')
    assert len(set(made)) == 10 and {INSTAGRAM.decompose(i).shard for i in made} == {7}


def test_concurrent_sessions_never_repeat_an_id(db: str) -> None:
    _install(db)
    results: list[list[int]] = [[] for _ in range(4)]

    def run(slot: int) -> None:
        with _connect(db) as conn:
            results[slot] = _ids(conn, 50_000)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    ids = [i for r in results for i in r]
    assert len(ids) == 200_000 and len(set(ids)) == len(ids)


def test_a_crash_with_the_clock_set_back_repeats_no_id(cluster: PostgresCluster) -> None:
    """Shared memory is gone after a crash; the state resumes from the flushed ceiling."""
    url = cluster.create_database(f"uidf_c_{uuid.uuid4().hex[:8]}")
    _install(url)
    conn = psycopg.connect(url)  # a transaction that has not committed when the crash comes
    before = _ids(conn, 50_000)
    cluster.crash_and_restart()
    conn.close()
    with _connect(url) as conn:
        conn.execute("SET uid_fields.clock_offset_ms = -600000")  # ten minutes back
        after = _ids(conn, 1000)
    assert min(after) > max(before)


def _plpgsql_clock(conn: psycopg.Connection, offset_ms: int) -> None:
    """The PL/pgSQL function's clock, ``offset_ms`` off the real one."""
    conn.execute(
        "CREATE OR REPLACE FUNCTION uid_next_id_clock() RETURNS bigint LANGUAGE sql AS "
        f"$$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint "
        f"+ {offset_ms} $$"
    )


def test_plpgsql_after_a_crash_with_the_clock_set_back_repeats_no_stored_id(
    cluster: PostgresCluster,
) -> None:
    """The PL/pgSQL function's common case writes only unlogged sequences, which a crash
    empties: it must resume above its durable state, whatever the clock says. (Its ids
    are covered from the commit of the row that stores them on; ids of a transaction
    that never commits are covered once anything flushes the WAL after them.)"""
    url = cluster.create_database(f"uidf_c_{uuid.uuid4().hex[:8]}")
    _install(url, language="plpgsql")
    with _connect(url) as conn:
        conn.execute("CREATE TABLE photos (id bigint PRIMARY KEY DEFAULT uid_next_id())")
        for _ in range(20):  # separate commits: most ids from the unlogged fast path
            conn.execute("INSERT INTO photos SELECT FROM generate_series(1, 500)")
        stored = int(conn.execute("SELECT max(id) FROM photos").fetchone()[0])  # type: ignore[index]
    cluster.crash_and_restart()
    with _connect(url) as conn:
        emptied = conn.execute("SELECT pg_sequence_last_value('uid_next_id_block')").fetchone()
        assert emptied == (None,)  # the crash emptied the unlogged block
        _plpgsql_clock(conn, -600_000)  # ten minutes back
        after = _ids(conn, 1000)
        assert int(conn.execute("SELECT count(*) FROM photos").fetchone()[0]) == 10_000  # type: ignore[index]
    assert min(after) > stored


def test_a_switch_while_plpgsql_sessions_make_ids_repeats_nothing(db: str) -> None:
    """Sessions on the PL/pgSQL fast path (no lock) while the C function takes over and
    hands back, many times: both keep to the state sequence's bound."""
    made: list[list[int]] = [[] for _ in range(3)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_making(slot: int) -> None:
        try:
            with _connect(db) as conn:
                while not stop.is_set():
                    made[slot].extend(_ids(conn, 300))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    _install(db, language="plpgsql")
    writers = [threading.Thread(target=keep_making, args=(i,)) for i in range(3)]
    for writer in writers:
        writer.start()
    mine: list[int] = []
    try:
        with _connect(db) as conn:
            for language in ("c", "plpgsql") * 4:
                time.sleep(0.05)
                _install(db, language=language)
                mine.extend(_ids(conn, 2000))
    finally:
        stop.set()
        for writer in writers:
            writer.join(30)
    assert not errors, errors
    ids = mine + [i for m in made for i in m]
    assert len(set(ids)) == len(ids)


def test_a_role_granted_the_state_sequence_may_call_the_plpgsql_function(db: str) -> None:
    """Where the application's role is not the one that installs (it was granted the
    state sequence, as the PL/pgSQL function needed), the install gives it the same
    rights on the function's other sequences."""
    role = f"uidf_app_{uuid.uuid4().hex[:8]}"
    with _connect(db) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute("CREATE SEQUENCE IF NOT EXISTS uid_next_id_state AS bigint MINVALUE 0")
        admin.execute(f"GRANT SELECT, UPDATE ON uid_next_id_state TO {role}")
    try:
        _install(db, language="plpgsql")
        with _connect(db) as app:
            app.execute(f"SET ROLE {role}")
            made = _ids(app, 3000)
        assert len(set(made)) == 3000
    finally:
        with _connect(db) as admin:
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_a_cancelled_statement_leaves_no_lock_behind(db: str) -> None:
    _install(db)
    for _ in range(5):
        with _connect(db) as conn:
            conn.execute("SET statement_timeout = '30ms'")
            with pytest.raises(psycopg.errors.QueryCanceled):
                _ids(conn, 50_000_000)
    with _connect(db) as other:
        other.execute("SET lock_timeout = '1s'")
        other.execute("SET statement_timeout = '5s'")
        assert len(set(_ids(other, 10_000))) == 10_000
        held = other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
        assert held.fetchone() == (0,)


def test_a_reading_a_day_ahead_is_refused_and_a_clock_going_back_repeats_nothing(
    db: str,
) -> None:
    _install(db)
    with _connect(db) as conn:
        first = _ids(conn, 100)
        conn.execute(f"SET uid_fields.clock_offset_ms = {DAY_MS}")
        with pytest.raises(psycopg.errors.DatetimeFieldOverflow, match="max_ahead_ms"):
            _ids(conn, 1)
        conn.execute("SET uid_fields.clock_offset_ms = -5000")  # NTP stepped back 5 s
        back = _ids(conn, 100)
        conn.execute("RESET uid_fields.clock_offset_ms")
        later = _ids(conn, 100)
    assert max(first) < min(back) and max(back) < min(later)
    assert abs(_age_ms(later[-1])) < 60_000  # never stamped a day ahead


def test_a_call_past_the_layouts_end_leaves_the_state_untouched(db: str) -> None:
    tiny = SnowflakeLayout(
        epoch_ms=int(time.time() * 1000) - 10_000,  # two bits of 1 s: ended 6 s ago
        time_bits=2,
        time_unit_ms=1000,
        fields=(("shard", 3),),
        sequence_bits=4,
    )
    function = NextIdFunction(tiny, shard=1, language="c")
    with _connect(db) as conn:
        for statement in function.create_statements():
            conn.execute(statement)
        for _ in range(2):
            with pytest.raises(psycopg.errors.NumericValueOutOfRange, match="exhausted"):
                conn.execute("SELECT uid_next_id()")
        state = conn.execute("SELECT last_value, is_called FROM uid_next_id_state").fetchone()
    assert state == (0, False)


def test_either_language_replaces_the_other_on_a_live_database(db: str) -> None:
    made: list[int] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_making() -> None:
        try:
            with _connect(db) as conn:
                while not stop.is_set():
                    made.extend(_ids(conn, 2000))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    _install(db, language="plpgsql")
    writer = threading.Thread(target=keep_making)
    writer.start()
    try:
        with _connect(db) as conn:
            for language in ("c", "plpgsql", "c", "plpgsql", "c"):
                time.sleep(0.2)
                _install(db, language=language)
                made.extend(_ids(conn, 5000))
    finally:
        stop.set()
        writer.join(30)
    assert not errors, errors
    assert len(made) > 25_000 and len(set(made)) == len(made)


def test_state_check_and_reset(db: str) -> None:
    function = _install(db, max_ahead_ms=None)
    with _connect(db) as conn:
        conn.execute("CREATE TABLE photos (id bigint PRIMARY KEY DEFAULT uid_next_id())")
        conn.execute("INSERT INTO photos DEFAULT VALUES")
        cursor = conn.cursor()
        # The ceiling runs at most half a second ahead: within check-db's tolerance.
        assert function.check_state(cursor, ["photos"]).ahead_ms <= 1000
        conn.execute(f"SET uid_fields.clock_offset_ms = {DAY_MS}")
        _ids(conn, 10)  # a clock a day ahead for a while: ids issued, not stored
        conn.execute("RESET uid_fields.clock_offset_ms")
        state = function.check_state(cursor, ["photos"])
        assert DAY_MS - 60_000 < state.ahead_ms < DAY_MS + 60_000 and state.resettable
        assert function.reset_state(cursor, ["photos"]).ahead_ms <= 1000
        made = int(conn.execute("INSERT INTO photos DEFAULT VALUES RETURNING id").fetchone()[0])  # type: ignore[index]
    assert abs(_age_ms(made)) < 60_000


def test_without_the_preload_the_install_says_what_is_missing() -> None:
    settings = tuple(s for s in c_library() if not s.startswith("shared_preload_libraries"))
    statements = NextIdFunction(INSTAGRAM, shard=1, language="c").create_statements()
    with (
        postgres_cluster(*settings) as bare,
        _connect(bare.url) as conn,
        pytest.raises(psycopg.Error, match="shared_preload_libraries"),
    ):
        for statement in statements:
            conn.execute(statement)


@pytest.mark.parametrize("language", ["c", "plpgsql"])
def test_a_read_only_transaction_is_refused_on_every_call(db: str, language: str) -> None:
    """The C function could answer from shared memory until its ceiling must move; it
    refuses at once instead, as the PL/pgSQL one (whose setval is refused) does."""
    _install(db, language=language)
    with _connect(db) as conn:
        _ids(conn, 10)
        for _ in range(3):
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                _ids(conn, 1)


def test_more_states_than_the_server_holds_is_a_clear_error() -> None:
    """The server's table, not one database's share of it (a quarter by default, which
    tests/core/test_pg_extension_privileges.py checks): the database may take all 16."""
    settings = ("uid_fields.max_states=16", "uid_fields.max_states_per_database=16")
    with postgres_cluster(*c_library(), *settings) as small:
        create_extension(small.database_url("template1"))
        url = small.create_database("uidf_c_states")
        made = []
        with _connect(url) as conn:
            for n in range(16):
                function = NextIdFunction(INSTAGRAM, shard=1, name=f"ids_{n}", language="c")
                for statement in function.create_statements():
                    conn.execute(statement)
                made.append(int(conn.execute(f"SELECT {function.call}").fetchone()[0]))  # type: ignore[index]
            extra = NextIdFunction(INSTAGRAM, shard=1, name="ids_16", language="c")
            with pytest.raises(psycopg.errors.ConfigurationLimitExceeded, match="max_states"):
                for statement in extra.create_statements():  # said at install
                    conn.execute(statement)
    assert len(set(made)) == 16


def test_a_state_check_sees_the_last_issued_id_not_the_ceiling(db: str) -> None:
    """The C function's sequence runs up to half a second ahead of what it issued; read
    as the state, it made every reset look due, and the reset issued ids again."""
    function = _install(db)
    with _connect(db) as conn:
        before = _ids(conn, 1000)
        cursor = conn.cursor()
        assert function.check_state(cursor).ahead_ms == 0
        function.reset_state(cursor)  # nothing ran ahead: nothing to do
        after = _ids(conn, 1000)
    assert len(set(before + after)) == 2000


def test_back_to_c_after_the_plpgsql_state_was_reset_repeats_nothing(db: str) -> None:
    """C → PL/pgSQL, whose state is reset, → C while a PL/pgSQL statement still runs:
    what the server's memory held from before must not be issued again."""
    _install(db)
    with _connect(db) as conn:
        _ids(conn, 300_000)  # C runs ahead of the clock (handed out, never stored)
    plpgsql = _install(db, language="plpgsql")
    with _connect(db) as conn:
        assert plpgsql.check_state(conn.cursor()).ahead_ms > 0
        plpgsql.reset_state(conn.cursor())  # back to now: allowed, nothing is stored
    made: list[int] = []

    def plpgsql_statement() -> None:
        with _connect(db) as other:
            made.extend(_ids(other, 30_000))  # planned with the PL/pgSQL function

    writer = threading.Thread(target=plpgsql_statement)
    writer.start()
    time.sleep(0.05)
    _install(db)
    with _connect(db) as conn:
        c_ids = _ids(conn, 50_000)
    writer.join(60)
    assert len(made) == 30_000
    assert len(set(made + c_ids)) == len(made) + len(c_ids)
