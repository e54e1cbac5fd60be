"""sharded_atomic(two_phase=True), bulk_create(two_phase=True) and resolve-prepared.

Prepared transactions need ``max_prepared_transactions`` > 0, which the shared server
does not set: two databases on a throwaway cluster join ``DATABASES`` for these tests
as ``tpc_0`` and ``tpc_1``. The tests need no backend of the suite's own, so they run
once, in the SQLite pass.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import IntegrityError, NotSupportedError, connections, transaction
from django.db.transaction import TransactionManagementError

from tests.django.testapp.models import Order
from tests.postgres_servers import PostgresCluster, busy_commit, postgres_cluster
from uid_fields.django import sharded_atomic
from uid_fields.django.connections.twophase import two_phase_atomic
from uid_fields.ops import twophase

pytestmark = pytest.mark.skipif(
    settings.BACKEND != "sqlite", reason="runs once, on a cluster of its own"
)
ALIASES = ("tpc_0", "tpc_1")


class Stop(BaseException):
    """Stands for the process dying at a stage (tests/stress kills a real process)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster("max_prepared_transactions=20") as server:
        yield server


@pytest.fixture(scope="module")
def cluster_urls(cluster: PostgresCluster) -> dict[str, str]:
    urls = {}
    for alias in ALIASES:
        urls[alias] = cluster.create_database(alias)
        with psycopg.connect(urls[alias], autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE items (id bigint PRIMARY KEY,"
                " code int UNIQUE DEFERRABLE INITIALLY DEFERRED)"
            )
    return {**urls, "port": str(cluster.port)}


@pytest.fixture
def tpc(cluster_urls: dict[str, str], django_db_blocker: Any) -> Iterator[None]:
    """The two aliases in ``DATABASES``, emptied; removed afterwards. Their commits do
    not wait for a synchronous standby (``busy_commit`` makes the server want one)."""
    base = {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": "127.0.0.1",
        "USER": "postgres",
        "OPTIONS": {"options": "-c synchronous_commit=local"},
    }
    extra = {a: {**base, "NAME": a, "PORT": cluster_urls["port"]} for a in ALIASES}
    configured = connections.configure_settings({"default": {**base, "NAME": "x"}, **extra})
    for alias in ALIASES:
        connections.settings[alias] = configured[alias]
        with psycopg.connect(cluster_urls[alias], autocommit=True) as conn:
            conn.execute("DELETE FROM items")
            twophase.ensure_table(conn.cursor())
            conn.execute(f"DELETE FROM {twophase.TABLE}")
    with django_db_blocker.unblock():
        yield
        call_command(
            "uid_fields",
            "resolve-prepared",
            *database_args(),
            "--older-than",
            "0",
            stdout=io.StringIO(),
        )
        for alias in ALIASES:
            connections[alias].close()
            del connections[alias]
            del connections.settings[alias]


def database_args() -> list[str]:
    return [arg for alias in ALIASES for arg in ("--database", alias)]


def insert(alias: str, *ids: int, code: int | None = None) -> None:
    with connections[alias].cursor() as cursor:
        for i in ids:
            cursor.execute("INSERT INTO items (id, code) VALUES (%s, %s)", [i, code])


def rows(alias: str) -> list[int]:
    side = connections.create_connection(alias)
    try:
        with side.cursor() as cursor:
            cursor.execute("SELECT id FROM items ORDER BY id")
            return [r[0] for r in cursor.fetchall()]
    finally:
        side.close()


def prepared() -> list[str]:
    with connections["tpc_0"].cursor() as cursor:
        cursor.execute("SELECT gid FROM pg_prepared_xacts")
        return [r[0] for r in cursor.fetchall()]


def test_sharded_atomic_two_phase_commits_both_and_runs_on_commit_after(tpc: None) -> None:
    seen_by_hook: list[list[int]] = []
    with sharded_atomic(*ALIASES, two_phase=True):
        insert("tpc_0", 1, 2)
        insert("tpc_1", 3)
        transaction.on_commit(lambda: seen_by_hook.append(rows("tpc_1")), using="tpc_1")
    assert [rows(a) for a in ALIASES] == [[1, 2], [3]]
    assert seen_by_hook == [[3]]  # the callback ran once the rows were really committed
    assert prepared() == []


def test_an_exception_in_the_block_commits_nothing(tpc: None) -> None:
    with pytest.raises(RuntimeError), sharded_atomic(*ALIASES, two_phase=True):
        insert("tpc_0", 1)
        insert("tpc_1", 2)
        raise RuntimeError("after the writes")
    assert [rows(a) for a in ALIASES] == [[], []]
    assert prepared() == []


def test_a_failed_prepare_commits_nothing(tpc: None) -> None:
    with pytest.raises(IntegrityError), sharded_atomic(*ALIASES, two_phase=True):
        insert("tpc_0", 1)
        insert("tpc_1", 2, code=5)
        insert("tpc_1", 3, code=5)  # a deferred unique check: fails at PREPARE
    assert [rows(a) for a in ALIASES] == [[], []]
    assert prepared() == []


@pytest.mark.parametrize(
    ("stage", "kept", "verb"), [("prepared", [], "rolled back"), ("decided", [1], "committed")]
)
def test_resolve_prepared_finishes_what_a_dead_coordinator_left(
    tpc: None, stage: str, kept: list[int], verb: str
) -> None:
    def die(reached: str) -> None:
        if reached == stage:
            raise Stop

    with pytest.raises(Stop), two_phase_atomic(*ALIASES, on_stage=die):
        insert("tpc_0", 1)
        insert("tpc_1", 1)
    assert len(prepared()) == 2
    out = io.StringIO()
    call_command(
        "uid_fields", "resolve-prepared", *database_args(), "--older-than", "3600", stdout=out
    )
    if stage == "prepared":  # undecided and young: its coordinator may be alive
        assert "0 branches committed, 0 rolled back, 2 left" in out.getvalue()
        out = io.StringIO()
        call_command(
            "uid_fields", "resolve-prepared", *database_args(), "--older-than", "0", stdout=out
        )
    assert f"{verb}: uidf:" in out.getvalue()
    assert [rows(a) for a in ALIASES] == [kept, kept]
    assert prepared() == []


def test_two_phase_must_be_the_outermost_block(tpc: None) -> None:
    with (
        transaction.atomic(using="tpc_1"),
        pytest.raises(TransactionManagementError, match="outermost transaction on 'tpc_1'"),
        sharded_atomic(*ALIASES, two_phase=True),
    ):
        pass


@pytest.mark.django_db(databases="__all__", transaction=True)
def test_two_phase_needs_postgresql() -> None:
    with pytest.raises(NotSupportedError, match="two-phase commit needs PostgreSQL"):
        Order.objects.bulk_create([Order(note=str(i)) for i in range(20)], two_phase=True)
    assert Order.objects.on_all_shards().count() == 0


# -- after the decision ----------------------------------------------------------------
def allow_connections(cluster: PostgresCluster, alias: str, allowed: bool) -> None:
    """Let connections to ``alias`` in, or refuse them (the database is unreachable)."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {alias} ALLOW_CONNECTIONS {str(allowed).lower()}")


def unreachable_at_the_decision(cluster: PostgresCluster, alias: str) -> Callable[[str], None]:
    def hook(stage: str) -> None:
        if stage == "decided":
            allow_connections(cluster, alias, False)

    return hook


class BackOnFirstFailure(logging.Handler):
    """Lets connections to the database in again when the first attempt has failed."""

    def __init__(self, cluster: PostgresCluster, alias: str) -> None:
        super().__init__()
        self.cluster, self.alias, self.done = cluster, alias, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.done and "attempt 1 of" in record.getMessage():
            self.done = True
            allow_connections(self.cluster, self.alias, True)


def test_a_commit_that_fails_after_the_decision_is_retried_before_returning(
    tpc: None, cluster: PostgresCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uid_fields.twophase")
    handler = BackOnFirstFailure(cluster, "tpc_1")
    logging.getLogger("uid_fields.twophase").addHandler(handler)
    try:
        with two_phase_atomic(*ALIASES, on_stage=unreachable_at_the_decision(cluster, "tpc_1")):
            insert("tpc_0", 1)
            insert("tpc_1", 2)
    finally:
        logging.getLogger("uid_fields.twophase").removeHandler(handler)
        allow_connections(cluster, "tpc_1", True)
    assert handler.done  # the first attempt failed ...
    assert [rows(a) for a in ALIASES] == [[1], [2]]  # ... and a retry committed it
    assert prepared() == []
    levels = {r.levelname for r in caplog.records}
    assert "ERROR" not in levels and "WARNING" in levels


def test_a_shard_unreachable_after_the_decision_returns_and_says_how_to_finish(
    tpc: None, cluster: PostgresCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Committed-or-will-be-committed: no exception once the commit is decided; an ERROR
    naming the branch left prepared and the command that finishes it."""
    caplog.set_level(logging.INFO, logger="uid_fields.twophase")
    try:
        with sharded_atomic(*ALIASES, two_phase=True):
            insert("tpc_0", 1)
            insert("tpc_1", 2)
            # New connections to tpc_1 fail from now on: its prepare goes through the
            # block's open connection, its COMMIT PREPARED needs a new one.
            allow_connections(cluster, "tpc_1", False)
        left = prepared()
    finally:
        allow_connections(cluster, "tpc_1", True)
    (gid,) = left
    assert gid.endswith(":1")  # tpc_1's branch
    (error,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert gid in error and "still prepared on tpc_1" in error and "resolve-prepared" in error
    assert rows("tpc_0") == [1]
    out = io.StringIO()
    call_command("uid_fields", "resolve-prepared", *database_args(), stdout=out)
    assert f"committed: {gid} on tpc_1" in out.getvalue()
    assert [rows(a) for a in ALIASES] == [[1], [2]]


def test_resolve_prepared_skips_a_busy_branch_and_reports_it(
    tpc: None, cluster: PostgresCluster
) -> None:
    def die(reached: str) -> None:
        if reached == "decided":
            raise Stop

    with pytest.raises(Stop), two_phase_atomic(*ALIASES, on_stage=die):
        insert("tpc_0", 1)
        insert("tpc_1", 1)
    (busy,) = [gid for gid in prepared() if gid.endswith(":1")]
    out = io.StringIO()
    with busy_commit(cluster, "tpc_1", busy):  # a live coordinator is committing it
        call_command("uid_fields", "resolve-prepared", *database_args(), stdout=out)
    text = out.getvalue()
    assert f"left (busy: another session is finishing it): {busy} on tpc_1" in text
    assert "1 branches committed, 0 rolled back, 1 left (1 busy)" in text
    assert [rows(a) for a in ALIASES] == [[1], [1]]
    assert prepared() == []
