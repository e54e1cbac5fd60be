"""Two-phase commit through the SQLAlchemy adapter: the session and bulk_insert.

The shared PostgreSQL server allows no prepared transactions, so these tests run four
shard databases on a throwaway cluster started with ``max_prepared_transactions=20``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, IntegrityError

from tests.postgres_servers import PostgresCluster, busy_commit, postgres_cluster
from uid_fields.ops import twophase
from uid_fields.sqlalchemy import bulk_insert, resolve_prepared, sharded_session

from .conftest import SHARDS
from .models import Base, Order


class Stop(BaseException):
    """Stands for the process dying at a stage (tests/stress kills a real process)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster("max_prepared_transactions=20") as server:
        for name in SHARDS:
            server.create_database(name)
        yield server


@pytest.fixture
def engines(cluster: PostgresCluster) -> Iterator[dict[str, Engine]]:
    made = {
        name: create_engine(
            cluster.database_url(name).replace("postgresql:", "postgresql+psycopg:")
        )
        for name in SHARDS
    }
    for engine in made.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
        with engine.begin() as connection:
            twophase.ensure_table(connection.connection.cursor())
            connection.execute(text(f"DELETE FROM {twophase.TABLE}"))
    yield made
    resolve_prepared(made, older_than_s=0)  # nothing prepared outlives a failed test
    for engine in made.values():
        engine.dispose()


def counts(engines: dict[str, Engine]) -> dict[str, int]:
    out = {}
    for name, engine in engines.items():
        with engine.connect() as connection:
            out[name] = connection.scalar(select(func.count()).select_from(Order))
    return out


def prepared(engines: dict[str, Engine]) -> list[str]:
    with engines[SHARDS[0]].connect() as connection:
        return list(connection.scalars(text("SELECT gid FROM pg_prepared_xacts")))


def test_a_session_commits_every_shard_by_two_phase_commit(engines: dict[str, Engine]) -> None:
    stages: list[str] = []
    with sharded_session(engines, two_phase=True) as session:
        session.on_two_phase_stage = stages.append
        session.add_all([Order(customer=f"c{i}") for i in range(40)])
        session.commit()
    assert stages == ["prepared", "decided", "finished"]
    assert sum(counts(engines).values()) == 40 and all(counts(engines).values())
    assert prepared(engines) == []


def test_a_failed_prepare_commits_no_shard(engines: dict[str, Engine]) -> None:
    with engines["shard_2"].begin() as connection:  # checked at PREPARE, after the flush
        connection.execute(
            text(
                "ALTER TABLE orders ADD CONSTRAINT one_customer UNIQUE (customer) "
                "DEFERRABLE INITIALLY DEFERRED"
            )
        )
    with sharded_session(engines, two_phase=True) as session:
        session.add_all([Order(customer="same") for _ in range(40)])
        with pytest.raises(IntegrityError):
            session.commit()
        session.rollback()
    assert counts(engines) == dict.fromkeys(SHARDS, 0)
    assert prepared(engines) == []


@pytest.mark.parametrize(("stage", "kept"), [("prepared", 0), ("decided", 40)])
def test_recovery_after_a_crash_loses_nothing_and_applies_nothing_twice(
    engines: dict[str, Engine], stage: str, kept: int
) -> None:
    def die(reached: str) -> None:
        if reached == stage:
            raise Stop

    orders = [Order(customer=f"c{i}") for i in range(40)]
    ids = [o.id for o in orders]
    session = sharded_session(engines, two_phase=True)
    session.on_two_phase_stage = die
    session.add_all(orders)
    with pytest.raises(Stop):
        session.commit()
    session.close()  # the connections go back; their branches stay prepared
    assert len(prepared(engines)) == 4
    resolve_prepared(engines, older_than_s=0)
    assert prepared(engines) == []
    assert sum(counts(engines).values()) == kept
    if kept == 0:  # rolled back: the application's retry writes the same rows once
        with sharded_session(engines, two_phase=True) as retry:
            retry.add_all([Order(id=i, customer="retry") for i in ids])
            retry.commit()
    assert sum(counts(engines).values()) == 40


def test_bulk_insert_on_engines_by_two_phase_commit(engines: dict[str, Engine]) -> None:
    ids = bulk_insert(engines, Order, [{"customer": f"c{i}"} for i in range(40)], two_phase=True)
    assert len(ids) == 40 and sum(counts(engines).values()) == 40
    assert prepared(engines) == []
    with pytest.raises(IntegrityError):  # one id repeated: no shard keeps its rows
        bulk_insert(
            engines,
            Order,
            [{"customer": "x"}] * 10 + [{"id": ids[0], "customer": "x"}],
            two_phase=True,
        )
    assert sum(counts(engines).values()) == 40


def test_two_phase_needs_postgresql_and_engines(
    engines: dict[str, Engine], sqlite_shards: dict[str, Engine]
) -> None:
    with pytest.raises(ArgumentError, match="two-phase commit needs PostgreSQL; shard_0"):
        sharded_session(sqlite_shards, two_phase=True)
    with sharded_session(engines) as session, pytest.raises(ArgumentError, match="engine"):
        bulk_insert(session, Order, [{"customer": "x"}], two_phase=True)


def test_resolve_prepared_skips_a_busy_branch_and_reports_it(
    cluster: PostgresCluster, engines: dict[str, Engine]
) -> None:
    def die(stage: str) -> None:
        if stage == "decided":
            raise Stop

    with sharded_session(engines, two_phase=True) as session:
        session.on_two_phase_stage = die
        session.add_all([Order(customer=f"c{i}") for i in range(40)])
        with pytest.raises(Stop):
            session.commit()
    with engines[SHARDS[0]].connect() as connection:
        found = connection.execute(text("SELECT gid, database FROM pg_prepared_xacts"))
        where = {gid: database for gid, database in found}
    gids = sorted(where)
    busy = gids[-1]
    local = {
        name: create_engine(
            cluster.database_url(name).replace("postgresql:", "postgresql+psycopg:"),
            connect_args={"options": "-c synchronous_commit=local"},
        )
        for name in SHARDS
    }
    try:
        with busy_commit(cluster, where[busy], busy):  # a live coordinator commits it
            result = resolve_prepared(local, older_than_s=0)
    finally:
        for engine in local.values():
            engine.dispose()
    assert [b.gid for b in result.busy] == [busy]
    assert sorted(b.gid for b in result.committed) == gids[:-1]
    assert sum(counts(engines).values()) == 40 and prepared(engines) == []
