"""The two-phase commit coordinator on real PostgreSQL databases.

The shared server runs with ``max_prepared_transactions = 0``, so these tests start a
throwaway cluster that allows prepared transactions, with three databases.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres_servers import PostgresCluster, busy_commit, postgres_cluster
from uid_fields import TwoPhaseCommitError
from uid_fields.ops import twophase
from uid_fields.ops.twophase import CommitRetry, Coordinator

DATABASES = ("shard_a", "shard_b", "shard_c")


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster("max_prepared_transactions=20") as server:
        for name in DATABASES:
            server.create_database(name)
            with psycopg.connect(server.database_url(name), autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE items (id bigint PRIMARY KEY, label text NOT NULL,"
                    " code int UNIQUE DEFERRABLE INITIALLY DEFERRED)"
                )
        yield server


class Shards:
    """One connection per database inside a transaction, and one in autocommit."""

    def __init__(self, cluster: PostgresCluster) -> None:
        self.cluster = cluster
        self.block = {n: psycopg.connect(cluster.database_url(n)) for n in DATABASES}
        self.side = {
            n: psycopg.connect(cluster.database_url(n), autocommit=True) for n in DATABASES
        }

    def in_block(self, name: str) -> Any:
        return self.block[name].cursor()

    def side_cursor(self, name: str) -> Any:
        return self.side[name].cursor()

    def discard(self, name: str) -> None:
        """A fresh autocommit connection for ``name`` (the coordinator's ``discard``)."""
        self.side[name].close()
        self.side[name] = psycopg.connect(self.cluster.database_url(name), autocommit=True)

    def reconnect_all(self) -> None:
        """New connections everywhere (after the server was restarted)."""
        for name in DATABASES:
            self.block[name].close()
            self.block[name] = psycopg.connect(self.cluster.database_url(name))
            self.discard(name)

    def insert(self, name: str, *ids: int, code: int | None = None) -> None:
        for i in ids:
            self.block[name].execute(
                "INSERT INTO items (id, label, code) VALUES (%s, %s, %s)", (i, f"row {i}", code)
            )

    def rows(self, name: str) -> list[int]:
        return [r[0] for r in self.side[name].execute("SELECT id FROM items ORDER BY id")]

    def prepared(self) -> list[str]:
        cur = self.side["shard_a"].execute("SELECT gid FROM pg_prepared_xacts ORDER BY gid")
        return [r[0] for r in cur]

    def decisions(self) -> list[tuple[str, str]]:
        cur = self.side["shard_a"].execute(
            f"SELECT transaction, outcome FROM {twophase.TABLE} ORDER BY decided_at"
        )
        return [(r[0], r[1]) for r in cur]

    def close(self) -> None:
        for conn in [*self.block.values(), *self.side.values()]:
            conn.close()


@pytest.fixture
def shards(cluster: PostgresCluster) -> Iterator[Shards]:
    value = Shards(cluster)
    for name in DATABASES:
        value.side[name].execute("DELETE FROM items")
    with value.side["shard_a"].cursor() as cursor:
        twophase.ensure_table(cursor)
        cursor.execute(f"DELETE FROM {twophase.TABLE}")
    yield value
    # A failed test must not leave prepared branches (and their locks) to the next.
    twophase.resolve({n: value.side_cursor(n) for n in DATABASES}, older_than_s=0)
    value.close()


def crash_at(stage: str) -> Callable[[str], None]:
    def hook(reached: str) -> None:
        if reached == stage:
            raise SystemExit(f"killed at {stage}")

    return hook


def side_cursors(shards: Shards) -> dict[str, Any]:
    return {n: shards.side_cursor(n) for n in DATABASES}


def test_commit_prepares_decides_and_finishes_every_database(shards: Shards) -> None:
    shards.insert("shard_a", 1, 2)
    shards.insert("shard_b", 3)
    shards.insert("shard_c", 4)
    stages: list[str] = []
    Coordinator(DATABASES, on_stage=stages.append).commit(shards.in_block, shards.side_cursor)
    assert stages == ["prepared", "decided", "finished"]
    assert [shards.rows(n) for n in DATABASES] == [[1, 2], [3], [4]]
    assert shards.prepared() == []
    assert shards.decisions() == []  # the commit record goes once every branch finished


def test_a_failed_prepare_rolls_back_every_database(shards: Shards) -> None:
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2, code=7)
    shards.insert("shard_b", 3, code=7)  # a deferred unique check fails at PREPARE
    shards.insert("shard_c", 4)
    with pytest.raises(psycopg.errors.UniqueViolation):
        Coordinator(DATABASES).commit(shards.in_block, shards.side_cursor)
    for conn in shards.block.values():
        conn.rollback()
    assert [shards.rows(n) for n in DATABASES] == [[], [], []]
    assert shards.prepared() == []  # shard_a was prepared, then rolled back


def test_a_crash_before_the_decision_is_rolled_back_by_recovery(shards: Shards) -> None:
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)
    coordinator = Coordinator(DATABASES[:2], on_stage=crash_at("prepared"))
    with pytest.raises(SystemExit):
        coordinator.commit(shards.in_block, shards.side_cursor)
    assert sorted(shards.prepared()) == sorted(coordinator.gids().values())
    waiting = twophase.resolve(side_cursors(shards), older_than_s=3600)
    assert len(waiting.waiting) == 2 and shards.prepared()  # its coordinator may be alive
    result = twophase.resolve(side_cursors(shards), older_than_s=0)
    assert sorted(b.database for b in result.rolled_back) == ["shard_a", "shard_b"]
    assert [shards.rows(n) for n in DATABASES] == [[], [], []]
    assert shards.prepared() == []
    assert shards.decisions() == [(coordinator.transaction, "abort")]  # kept: see below


def test_a_crash_after_the_decision_is_committed_by_recovery(shards: Shards) -> None:
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)
    shards.insert("shard_c", 3)
    coordinator = Coordinator(DATABASES, on_stage=crash_at("decided"))
    with pytest.raises(SystemExit):
        coordinator.commit(shards.in_block, shards.side_cursor)
    assert len(shards.prepared()) == 3
    result = twophase.resolve(side_cursors(shards), older_than_s=3600)  # decided: no wait
    assert len(result.committed) == 3
    assert [shards.rows(n) for n in DATABASES] == [[1], [2], [3]]
    assert shards.prepared() == [] and shards.decisions() == []


def test_a_coordinator_that_wakes_after_recovery_aborted_commits_nothing(
    shards: Shards,
) -> None:
    """Recovery and a slow coordinator race for the decision row; the first one wins."""
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)

    def recovery_runs_meanwhile(stage: str) -> None:
        if stage == "prepared":
            twophase.resolve(side_cursors(shards), older_than_s=0)

    coordinator = Coordinator(DATABASES[:2], on_stage=recovery_runs_meanwhile)
    with pytest.raises(TwoPhaseCommitError, match="aborted by recovery"):
        coordinator.commit(shards.in_block, shards.side_cursor)
    assert [shards.rows(n) for n in DATABASES] == [[], [], []]
    assert shards.prepared() == []


def test_recovery_leaves_branches_whose_decision_database_it_was_not_given(
    shards: Shards,
) -> None:
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)
    coordinator = Coordinator(["shard_a", "shard_b"], on_stage=crash_at("decided"))
    with pytest.raises(SystemExit):
        coordinator.commit(shards.in_block, shards.side_cursor)
    result = twophase.resolve({"shard_b": shards.side_cursor("shard_b")}, older_than_s=0)
    assert [b.database for b in result.unreachable] == ["shard_b"]
    assert len(shards.prepared()) == 2
    twophase.resolve(side_cursors(shards), older_than_s=0)
    assert [shards.rows(n) for n in DATABASES] == [[1], [2], []]


@pytest.mark.parametrize("name", ["", "a:b", "a'b", "x" * 61, 5])
def test_names_that_cannot_go_into_a_gid_are_refused(name: Any) -> None:
    with pytest.raises(ValueError, match="cannot take part in two-phase commit"):
        Coordinator(["shard_a", name])


def test_gids_round_trip() -> None:
    coordinator = Coordinator(["shard_a", "shard_b"])
    gids = coordinator.gids()
    assert twophase.parse_gid(gids["shard_b"]) == (coordinator.transaction, "shard_a", 1)
    assert twophase.parse_gid("uidf:nothex:shard_a:0") is None
    assert twophase.parse_gid("someone-else's") is None


# -- after the decision: retries, what an operator is told, and busy branches ------------
def terminate_side_connection(shards: Shards, name: str) -> Callable[[str], None]:
    """At the decision, the server ends the coordinator's connection to ``name`` (as a
    restart or a network cut would): its first COMMIT PREPARED there fails."""

    def hook(stage: str) -> None:
        if stage == "decided":
            pid = shards.side[name].info.backend_pid
            shards.side["shard_a"].execute("SELECT pg_terminate_backend(%s)", (pid,))

    return hook


def test_a_commit_prepared_that_fails_after_the_decision_is_retried(
    shards: Shards, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uid_fields.twophase")
    shards.insert("shard_a", 1)
    shards.insert("shard_c", 3)
    coordinator = Coordinator(
        ["shard_a", "shard_c"], on_stage=terminate_side_connection(shards, "shard_c")
    )
    left = coordinator.commit(shards.in_block, shards.side_cursor, discard=shards.discard)
    assert left == []
    assert [shards.rows(n) for n in DATABASES] == [[1], [], [3]]
    assert shards.prepared() == [] and shards.decisions() == []
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    gid = coordinator.gids()["shard_c"]
    assert any(level == "WARNING" and f"{gid} on shard_c failed" in m for level, m in lines)
    assert any(
        level == "INFO" and f"committed {gid} on shard_c at attempt 2" in m for level, m in lines
    )
    assert not [m for level, m in lines if level == "ERROR"]
    assert any(level == "INFO" and "commit decided" in m for level, m in lines)


def test_a_shard_still_down_after_the_retries_is_an_error_naming_the_gid_and_the_fix(
    shards: Shards, caplog: pytest.LogCaptureFixture
) -> None:
    """The caller is promised committed-or-will-be-committed once the decision is made:
    commit() returns (in bounded time), and the log says what is left and how to end it."""
    caplog.set_level(logging.INFO, logger="uid_fields.twophase")
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)

    def server_down(stage: str) -> None:
        if stage == "decided":
            shards.cluster.stop()

    coordinator = Coordinator(["shard_a", "shard_b"], on_stage=server_down)
    try:
        left = coordinator.commit(shards.in_block, shards.side_cursor, discard=shards.discard)
    finally:
        shards.cluster.start()
        shards.reconnect_all()
    gids = coordinator.gids()
    assert left == [gids["shard_a"], gids["shard_b"]]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2
    for name in ("shard_a", "shard_b"):
        (line,) = [m for m in errors if gids[name] in m]
        assert re.search(rf"is committed.*still prepared on {name} after \d attempts", line)
        assert "resolve-prepared" in line and "resolve_prepared" in line
    # Nothing was lost: the decision is durable, recovery commits both branches.
    assert sorted(shards.prepared()) == sorted(gids.values())
    result = twophase.resolve(side_cursors(shards), older_than_s=3600)
    assert len(result.committed) == 2
    assert [shards.rows(n) for n in DATABASES] == [[1], [2], []]


def test_the_retries_are_configurable(shards: Shards) -> None:
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)
    attempts: list[str] = []

    def side(name: str) -> Any:
        if name == "shard_b":
            attempts.append(name)
            raise psycopg.OperationalError("the shard is unreachable")  # its connect fails
        return shards.side_cursor(name)

    once = CommitRetry(attempts=1)
    left = Coordinator(["shard_a", "shard_b"], retry=once).commit(shards.in_block, side)
    assert len(left) == 1 and len(attempts) == 1
    attempts.clear()
    twophase.configure_commit_retry(CommitRetry(attempts=3, backoff_s=0.01, within_s=1.0))
    try:
        shards.insert("shard_a", 3)
        shards.insert("shard_b", 4)
        Coordinator(["shard_a", "shard_b"]).commit(shards.in_block, side)
        assert len(attempts) == 3
    finally:
        twophase.configure_commit_retry(CommitRetry())
    with pytest.raises(ValueError, match="attempts"):
        CommitRetry(attempts=0)


def local_commit_cursors(cluster: PostgresCluster) -> tuple[list[Any], dict[str, Any]]:
    """Autocommit cursors whose commits do not wait for a standby."""
    conns = [
        psycopg.connect(
            cluster.database_url(n), autocommit=True, options="-c synchronous_commit=local"
        )
        for n in DATABASES
    ]
    return conns, {n: c.cursor() for n, c in zip(DATABASES, conns, strict=True)}


def test_recovery_skips_a_branch_a_live_coordinator_is_committing_and_reports_it(
    shards: Shards, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uid_fields.twophase")
    shards.insert("shard_a", 1)
    shards.insert("shard_b", 2)
    coordinator = Coordinator(["shard_a", "shard_b"], on_stage=crash_at("decided"))
    with pytest.raises(SystemExit):
        coordinator.commit(shards.in_block, shards.side_cursor)
    gids = coordinator.gids()
    with busy_commit(shards.cluster, "shard_b", gids["shard_b"]):
        conns, cursors = local_commit_cursors(shards.cluster)
        try:
            result = twophase.resolve(cursors, older_than_s=0)
        finally:
            for conn in conns:
                conn.close()
    assert [b.gid for b in result.committed] == [gids["shard_a"]]
    assert [b.gid for b in result.busy] == [gids["shard_b"]]
    assert f"left (busy: another session is finishing it): {gids['shard_b']} on shard_b" in (
        result.lines()
    )
    assert result.left == 1
    warned = [
        r for r in caplog.records if r.levelname == "WARNING" and gids["shard_b"] in r.getMessage()
    ]
    assert len(warned) == 1 and "busy" in warned[0].getMessage()
    assert [shards.rows(n) for n in DATABASES] == [[1], [2], []]  # the live one finished
    assert shards.prepared() == []
