"""Who may use the C ``next_id`` (issue 37): no role that logs in can stop the
application's ids, and a REVOKE takes effect.

The extension's states live in one fixed table of the server's shared memory
(``uid_fields.max_states``), shared by every database. On a throwaway cluster with a
small table (32 states, so filling it takes a moment):

- a LOGIN-only role tries to fill the table with states of its own TEMP sequences, in
  the application's database and in another one, before and after a restart: the
  application's existing and new tables still get their ids;
- another tenant of the server, allowed to run the extension in its own database, fills
  what it can: its database stops at ``uid_fields.max_states_per_database``, the
  application's database still gets new states, and the tenant's dropped sequences give
  their entries back;
- ``REVOKE UPDATE`` on a state sequence stops that role's ``next_id`` from the next
  transaction on, in a session that already used it;
- an install by a role that may not run the extension's functions stops naming the
  superuser's ``GRANT``; a superuser's install grants them to the role that owns the
  per-table function; an install that may not grant them warns about an owner of the
  state sequence without them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.postgres_servers import PostgresCluster, c_library, create_extension, postgres_cluster
from uid_fields import INSTAGRAM
from uid_fields.sql.pg_extension import extension_problem
from uid_fields.sql.postgres import NextIdFunction

MAX_STATES = 32
APP, ATTACKER, TENANT = "uidf_priv_app", "uidf_priv_attacker", "uidf_priv_tenant"
# uid_fields.next_id's layout arguments after the state and the shard (Instagram's).
LAYOUT = "1704067200000, 1, 23, 10, 10, 0, 8191, 2199023255551, 3600000"


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster(*c_library(), f"uid_fields.max_states={MAX_STATES}") as running:
        with _admin(running.url) as admin:
            for role in (APP, ATTACKER, TENANT):
                admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
            admin.execute(f"CREATE DATABASE uidf_priv_app OWNER {APP}")
            admin.execute(f"CREATE DATABASE uidf_priv_tenant OWNER {TENANT}")
        for name in ("postgres", "uidf_priv_app", "uidf_priv_tenant"):
            create_extension(running.database_url(name))
        # What the operator does for each application role (docs/postgres-extension.md).
        for name, role in (("uidf_priv_app", APP), ("uidf_priv_tenant", TENANT)):
            with _admin(running.database_url(name)) as admin:
                admin.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO {role}")
        yield running


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def _as(cluster: PostgresCluster, role: str, database: str) -> psycopg.Connection:
    url = cluster.database_url(database).replace("postgresql://postgres@", f"postgresql://{role}@")
    return psycopg.connect(url, autocommit=True)


def _install(conn: psycopg.Connection, name: str) -> NextIdFunction:
    function = NextIdFunction(INSTAGRAM, shard=5, name=name, language="c")
    for statement in function.create_statements():
        conn.execute(statement)
    return function


def _id(conn: psycopg.Connection, name: str) -> int:
    row = conn.execute(f"SELECT {name}()").fetchone()
    assert row is not None
    return int(row[0])


def _fill(conn: psycopg.Connection, temporary: bool, tries: int = 2 * MAX_STATES) -> list[str]:
    """Make a state sequence and one id from it ``tries`` times; the errors seen (an
    empty string for a success)."""
    said = []
    kind = "TEMP SEQUENCE" if temporary else "SEQUENCE"
    for _ in range(tries):
        name = f"fill_{uuid.uuid4().hex[:10]}"
        conn.execute(f"CREATE {kind} {name} AS bigint MINVALUE 0 START 0")
        try:
            conn.execute(f"SELECT uid_fields.next_id('{name}'::regclass, 1, {LAYOUT})")
            said.append("")
        except psycopg.Error as error:
            said.append(str(error))
    return said


def test_a_login_only_role_cannot_stop_the_applications_next_id(
    cluster: PostgresCluster,
) -> None:
    """The exhaustion attack of issue 37: TEMP sequences of a role that can only log in,
    in the application's database and in ``postgres``, kept open while the application
    works; then again first thing after a restart."""
    with _as(cluster, APP, "uidf_priv_app") as app:
        _install(app, "uid_kept")
        before = _id(app, "uid_kept")
    attackers = [_as(cluster, ATTACKER, db) for db in ("uidf_priv_app", "postgres")]
    try:
        said = [error for conn in attackers for error in _fill(conn, temporary=True)]
        with _as(cluster, APP, "uidf_priv_app") as app:
            _install(app, "uid_added")  # a new table's state, made while under attack
            assert _id(app, "uid_added") > 0
            assert _id(app, "uid_kept") > before
    finally:
        for conn in attackers:
            conn.close()
    assert all(error for error in said), "the attacker got ids"
    assert all("permission denied" in error for error in said), said[:3]

    cluster.crash_and_restart()  # the states are gone; the attacker is first
    attackers = [_as(cluster, ATTACKER, db) for db in ("uidf_priv_app", "postgres")]
    try:
        for conn in attackers:
            _fill(conn, temporary=True)
        with _as(cluster, APP, "uidf_priv_app") as app:
            assert _id(app, "uid_kept") > before
            assert _id(app, "uid_added") > before
    finally:
        for conn in attackers:
            conn.close()


def test_temporary_state_sequences_are_refused(cluster: PostgresCluster) -> None:
    """Even for a role that may run the extension: a TEMP sequence's state would outlive
    it in the shared table."""
    with _as(cluster, APP, "uidf_priv_app") as app:
        said = _fill(app, temporary=True, tries=1)
    assert "temporary" in said[0], said


def test_one_database_cannot_take_the_states_of_another(cluster: PostgresCluster) -> None:
    """A tenant allowed to run the extension in its own database makes as many states
    as it can: it stops at its database's share, the application still gets new
    states, and the tenant's dropped sequences give their entries back."""
    with _as(cluster, TENANT, "uidf_priv_tenant") as tenant:
        said = _fill(tenant, temporary=False)
        made = said.count("")
        assert 0 < made < MAX_STATES, said
        refused = [error for error in said if error]
        assert refused and all("max_states_per_database" in e for e in refused), refused[:3]
        with _as(cluster, APP, "uidf_priv_app") as app:
            for n in range(3):
                _install(app, f"uid_more_{n}")
                assert _id(app, f"uid_more_{n}") > 0
        # the tenant drops its sequences: their entries serve new ones
        tenant.execute(
            "DO $$ DECLARE s record; BEGIN FOR s IN SELECT relname FROM pg_class "
            "WHERE relkind = 'S' AND relname LIKE 'fill_%' LOOP "
            "EXECUTE format('DROP SEQUENCE %I', s.relname); END LOOP; END $$"
        )
        again = _fill(tenant, temporary=False, tries=made)
        assert again == [""] * made, again


def test_a_revoke_stops_next_id_in_a_session_that_used_it(cluster: PostgresCluster) -> None:
    """The permission is asked again in each transaction: after ``REVOKE UPDATE`` on the
    state sequence, the same session's next call is refused."""
    with _admin(cluster.database_url("uidf_priv_app")) as admin:
        admin.execute("CREATE SEQUENCE granted_state AS bigint MINVALUE 0 START 0")
        admin.execute(f"GRANT SELECT, UPDATE ON granted_state TO {APP}")
        with _as(cluster, APP, "uidf_priv_app") as app:
            call = f"SELECT uid_fields.next_id('public.granted_state'::regclass, 2, {LAYOUT})"
            first = app.execute(call).fetchone()
            assert first is not None and INSTAGRAM.decompose(first[0]).shard == 2
            admin.execute(f"REVOKE UPDATE ON granted_state FROM {APP}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="granted_state"):
                app.execute(call)
            # and in a transaction that began before the REVOKE: refused from the next one
            admin.execute(f"GRANT UPDATE ON granted_state TO {APP}")
            with app.transaction():
                app.execute(call)
                admin.execute(f"REVOKE UPDATE ON granted_state FROM {APP}")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(call)


def test_an_install_without_the_grant_names_it(cluster: PostgresCluster) -> None:
    """A role the superuser did not grant the extension's functions to: the install
    stops before it creates anything, naming the exact GRANT."""
    role = "uidf_priv_nogrant"
    with _admin(cluster.url) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {role} OWNER {role}")
    create_extension(cluster.database_url(role))
    with _as(cluster, role, role) as conn:
        with pytest.raises(psycopg.Error) as raised:
            _install(conn, "uid_refused")
        said = str(raised.value)
        assert f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO {role};" in said, said
        assert "superuser" in said, said
        missing = conn.execute("SELECT to_regclass('uid_refused_state')").fetchone()
        assert missing == (None,)
        # check-db asks the same question
        problem = extension_problem(conn.cursor())
        assert problem and "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields" in problem


def test_a_superusers_install_grants_the_functions_to_the_owner(
    cluster: PostgresCluster,
) -> None:
    """The functions were installed by the application's role; a superuser reinstalls
    them (``check-db --fix``, a migration run as the superuser): the owner of the
    per-table functions may run the extension's functions afterwards."""
    role = "uidf_priv_owner"
    with _admin(cluster.url) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {role} OWNER {role}")
    url = cluster.database_url(role)
    create_extension(url)
    with _admin(url) as admin:
        admin.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO {role}")
    with _as(cluster, role, role) as conn:
        _install(conn, "uid_owned")
    with _admin(url) as admin:
        admin.execute(f"REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields FROM {role}")
        _install(admin, "uid_owned")
    with _as(cluster, role, role) as conn:
        assert _id(conn, "uid_owned") > 0


def test_an_install_that_may_not_grant_warns_about_an_owner_without_the_grant(
    cluster: PostgresCluster,
) -> None:
    """The installing role may run the functions but not grant them, and the state
    sequence belongs to another role that may not run them: the install goes through
    and warns, naming the superuser's GRANT for that owner."""
    owner = "uidf_priv_seq_owner"
    with _admin(cluster.url) as admin:
        admin.execute(f"CREATE ROLE {owner}")
    with _admin(cluster.database_url("uidf_priv_app")) as admin:
        admin.execute("CREATE SEQUENCE uid_foreign_state AS bigint MINVALUE 0 START 0")
        admin.execute(f"ALTER SEQUENCE uid_foreign_state OWNER TO {owner}")
        admin.execute(f"GRANT SELECT, UPDATE ON uid_foreign_state TO {APP}")
    warnings: list[str] = []
    with _as(cluster, APP, "uidf_priv_app") as app:
        app.add_notice_handler(lambda notice: warnings.append(str(notice.message_primary)))
        _install(app, "uid_foreign")
        assert _id(app, "uid_foreign") > 0
    said = [w for w in warnings if owner in w]
    assert len(said) == 1, warnings
    assert f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO {owner};" in said[0]
