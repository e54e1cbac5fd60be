"""A move by logical replication refuses databases reached through a pooler.

Behind PgBouncer in transaction mode the mover's session settings are not its own, and
a subscription's replication connection must reach the server itself: the move says so
before it creates anything, rather than failing half-way.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from tests import services
from tests.pgbouncer import running_pgbouncer
from tests.stress.logical_move_app import HIGH, LOW, Old
from uid_fields import ReplicationUnavailable
from uid_fields.sqlalchemy import logical_shard_move, sharded_session

pytestmark = pytest.mark.postgres  # PostgreSQL behind a throwaway PgBouncer


@pytest.fixture
def pooled_engines() -> Iterator[dict[str, Engine]]:
    names = {side: services.database_name(f"uidf_pooled_{side}", 0) for side in "ab"}
    with services.postgres_connection() as conn:
        conn.autocommit = True
        for name in names.values():
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
    with running_pgbouncer(pool_size=2) as port:
        engines = {
            side: create_engine(
                f"postgresql+psycopg://postgres@127.0.0.1:{port}/{name}",
                connect_args={"prepare_threshold": None},
            )
            for side, name in names.items()
        }
        for engine in engines.values():
            Old[0].metadata.create_all(engine)
        yield engines
        for engine in engines.values():
            engine.dispose()
    with services.postgres_connection() as conn:
        conn.autocommit = True
        for name in names.values():
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_postgresql_move_through_a_pooler_is_refused_with_the_reason(
    pooled_engines: dict[str, Engine],
) -> None:
    with (
        sharded_session({"a": pooled_engines["a"]}) as session,
        logical_shard_move(
            session,
            Old,
            source="a",
            target="b",
            engines={"b": pooled_engines["b"]},
            low=LOW,
            high=HIGH,
        ) as move,
        pytest.raises(ReplicationUnavailable) as refused,
    ):
        move.run()
    message = str(refused.value)
    assert "through a pooler or proxy" in message and "--method portable" in message
    with pooled_engines["a"].connect() as conn:  # nothing was created on the source
        assert conn.exec_driver_sql("SELECT count(*) FROM pg_publication").scalar() == 0
