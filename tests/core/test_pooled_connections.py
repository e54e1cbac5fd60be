"""The connections the project opens itself, behind PgBouncer in transaction mode.

Behind such a pooler, a prepared statement belongs to a server connection, not to the
client that prepared it: the client's next Bind may reach another server connection
(where the name does not exist, or names another client's statement). psycopg prepares
a statement run five times on one connection, so a lease opened from a URL, which runs
the same renewal UPDATE every few seconds, broke after its fifth renewal next to other
clients that prepare theirs. The project's own connections prepare nothing.
"""

from __future__ import annotations

import logging
import threading
import uuid

import psycopg
import pytest

from tests import services
from tests.pgbouncer import running_pgbouncer
from uid_fields import TWITTER, DatabaseLease, SnowflakeGenerator
from uid_fields.clock import ManualMonotonicClock

pytestmark = pytest.mark.postgres  # PostgreSQL behind a throwaway PgBouncer


def _preparing_client(port: int, stop: threading.Event) -> None:
    """Another application's connection: every statement prepared at once, each under
    psycopg's first name (``_pg3_0``) on whichever server connection it gets. Its own
    errors (it is what the docs tell users not to do) are no concern here."""
    while not stop.is_set():
        try:
            with psycopg.connect(
                host="127.0.0.1",
                port=port,
                dbname="postgres",
                user="postgres",
                autocommit=True,
                prepare_threshold=0,
            ) as conn:
                while not stop.is_set():
                    conn.execute("SELECT %s::int + 1", (1,))
        except psycopg.Error:
            continue


def test_a_url_lease_renews_through_pgbouncer_next_to_clients_that_prepare(
    caplog: pytest.LogCaptureFixture,
) -> None:
    services.postgres_connection().close()  # the server is there (or a skip/failure)
    table = f"uidf_pooled_{uuid.uuid4().hex[:10]}"
    with running_pgbouncer(pool_size=2) as port:
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        clock = ManualMonotonicClock()
        lease = DatabaseLease(url, "pooled", ttl=5, table=table, clock=clock)
        lease.create_table()
        stop = threading.Event()
        others = [threading.Thread(target=_preparing_client, args=(port, stop)) for _ in range(3)]
        for other in others:
            other.start()
        try:
            SnowflakeGenerator(TWITTER, worker=lease).next_id()
            with caplog.at_level(logging.WARNING, logger="uid_fields"):
                for _ in range(20):  # 20 renewals: psycopg prepares from the 5th on
                    clock.advance(5 / 3)
            failed = [r.getMessage() for r in caplog.records if "renewal failed" in r.getMessage()]
            assert failed == []
            assert lease.claims == 1 and lease.losses == 0
            lease.release()
        finally:
            stop.set()
            for other in others:
                other.join(10)
            with services.postgres_connection() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
