"""The two-phase commit coordinator on real PostgreSQL databases.

The shared server runs with ``max_prepared_transactions = 0``, so these tests start a
throwaway cluster that allows prepared transactions, with three databases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from tests.postgres_servers import PostgresCluster, postgres_cluster
from uid_fields import TwoPhaseCommitError
from uid_fields.ops import twophase
from uid_fields.ops.twophase import Coordinator

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
