"""Kill the coordinating process between prepare and commit; recover; nothing lost or doubled.

A spawned process writes 40 orders over 4 PostgreSQL shards (a throwaway cluster that
allows prepared transactions) with ``sharded_session(two_phase=True)`` and is killed with
SIGKILL at a stage of the commit: after every shard prepared (no decision yet), or after
the commit was decided (no shard committed yet). ``resolve_prepared`` then rolls back
the first and commits the second; the application's retry of the same rows writes them
exactly once, and a second retry finds them there.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from multiprocessing import get_context
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from tests.postgres_servers import PostgresCluster, postgres_cluster
from tests.sqlalchemy.models import Base, Order
from tests.stress.procs import two_phase_kill_worker
from uid_fields.sqlalchemy import resolve_prepared, sharded_session

SHARDS = [f"shard_{i}" for i in range(4)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster("max_prepared_transactions=20") as server:
        for name in SHARDS:
            server.create_database(name)
        yield server


def url(cluster: PostgresCluster, name: str) -> str:
    return cluster.database_url(name).replace("postgresql:", "postgresql+psycopg:")


@pytest.fixture
def engines(cluster: PostgresCluster) -> Iterator[dict[str, Engine]]:
    made = {name: create_engine(url(cluster, name)) for name in SHARDS}
    for engine in made.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    yield made
    for engine in made.values():
        engine.dispose()


def stored(engines: dict[str, Engine]) -> list[int]:
    ids: list[int] = []
    for engine in engines.values():
        with engine.connect() as connection:
            ids += connection.scalars(select(Order.id)).all()
    return sorted(ids)


def in_doubt(engines: dict[str, Engine]) -> int:
    with engines[SHARDS[0]].connect() as connection:
        return int(connection.scalar(text("SELECT count(*) FROM pg_prepared_xacts")) or 0)


def write(engines: dict[str, Engine], ids: list[int]) -> None:
    with sharded_session(engines, two_phase=True) as session:
        session.add_all([Order(id=i, customer="retry") for i in ids])
        session.commit()


@pytest.mark.parametrize(("stage", "committed"), [("prepared", False), ("decided", True)])
def test_kill_between_prepare_and_commit_then_recover(
    cluster: PostgresCluster,
    engines: dict[str, Engine],
    tmp_path: Path,
    stage: str,
    committed: bool,
) -> None:
    ids_file = tmp_path / "ids"
    process = get_context("spawn").Process(
        target=two_phase_kill_worker,
        args=({n: url(cluster, n) for n in SHARDS}, stage, str(ids_file)),
    )
    process.start()
    process.join(120)
    assert process.exitcode == -signal.SIGKILL
    ids = sorted(int(i) for i in ids_file.read_text().split())
    assert in_doubt(engines) == 4  # every shard's branch outlived its coordinator
    assert stored(engines) == []  # and nothing of it is visible yet

    result = resolve_prepared(engines, older_than_s=0)
    assert len(result.committed if committed else result.rolled_back) == 4
    assert in_doubt(engines) == 0
    assert stored(engines) == (ids if committed else [])

    if not committed:
        write(engines, ids)  # the application's retry: same ids, written once
    assert stored(engines) == ids
    with pytest.raises(IntegrityError):
        write(engines, ids[:1])  # a second retry cannot apply them twice
    assert stored(engines) == ids
    with sharded_session(engines) as session:
        assert session.on_all_shards(select(func.count()).select_from(Order)).scalar() == 40
