"""DatabaseLease on SQLite, PostgreSQL and MariaDB: claim, renew, release, fence."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests import services
from tests.core.lease_databases import Database
from tests.redis_servers import free_port
from uid_fields import (
    TWITTER,
    CoordinatorUnavailableError,
    DatabaseLease,
    SnowflakeGenerator,
    SnowflakeLayout,
    WorkerIdsExhaustedError,
)
from uid_fields.clock import ManualMonotonicClock
from uid_fields.sqlalchemy import database_lease, lease_table

SMALL = SnowflakeLayout(epoch_ms=TWITTER.epoch_ms, fields=(("worker", 2),), sequence_bits=12)


def rows(db: Database, name: str) -> dict[int, tuple[str | None, int]]:
    found = db.execute(
        f"SELECT node, token, expires_ms FROM {db.table} WHERE name = %s ORDER BY node", (name,)
    )
    return {int(node): (token, int(expires)) for node, token, expires in found}


def test_claims_the_lowest_free_id_and_releases_it(db: Database) -> None:
    a, b, c = db.lease(margin=0.25), db.lease(margin=0.25), db.lease(margin=0.25)
    gens = [SnowflakeGenerator(TWITTER, datacenter=2, worker=x) for x in (a, b, c)]
    assert [g.node["worker"] for g in gens] == [0, 1, 2]
    assert len(rows(db, "orders")) == 32  # the whole 5-bit range, made on first use
    released_at = int(time.time() * 1000)
    b.release()
    token, expires = rows(db, "orders")[1]
    # Released, but kept for the clock-skew margin before anyone may claim it.
    assert token is None and released_at < expires <= int(time.time() * 1000) + 250 + 50
    d = db.lease(margin=0.25)
    assert SnowflakeGenerator(TWITTER, worker=d).node["worker"] == 3
    ids = gens[0].next_ids(3000) + gens[2].next_ids(3000)
    assert len(set(ids)) == 6000
    for lease in (a, c, d):
        lease.release()
    assert all(token is None for token, _ in rows(db, "orders").values())
    time.sleep(0.3)  # the margin, by the database's clock
    assert SnowflakeGenerator(TWITTER, worker=db.lease()).node["worker"] == 0


def test_renewal_moves_the_expiry_forward(db: Database) -> None:
    """The real-time end-to-end test of database renewals (the others run on a manual
    clock): the renewal thread, on its own, moves the row's expiry forward."""
    lease = db.lease("renew", ttl=3)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    first = rows(db, "renew")[0][1]
    deadline = time.monotonic() + 3 * 0.75  # the fencing deadline: renewed before it
    while rows(db, "renew")[0][1] <= first:
        assert time.monotonic() < deadline, "not renewed before the deadline"
        time.sleep(0.02)
    assert lease.losses == 0 and lease.seconds_left is not None and lease.seconds_left > 0
    lease.release()


def test_renewals_on_a_manual_clock_keep_the_row_for_many_ttls(db: Database) -> None:
    clock = ManualMonotonicClock()
    lease = db.lease("renew", ttl=5, clock=clock)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    now_ms = int(time.time() * 1000)
    db.execute(  # as if the last renewal was long ago
        f"UPDATE {db.table} SET expires_ms = %s WHERE name = %s AND node = 0",
        (now_ms + 1000, "renew"),
    )
    clock.advance(5 / 3)  # one renewal pause
    assert rows(db, "renew")[0][1] > now_ms + 4000  # renewed: a whole ttl again
    assert lease.seconds_left == pytest.approx(5 - 1.25)  # counted from the renewal
    clock.advance(50)  # ten ttls: thirty renewals
    assert lease.claims == 1 and lease.losses == 0
    assert lease.seconds_left is not None and lease.seconds_left > 5 - 1.25 - 5 / 3
    lease.release()


def test_an_expired_holder_is_replaced(db: Database) -> None:
    # A crashed process's row: a token whose expiry has passed.
    first = db.lease("crash")
    assert SnowflakeGenerator(SMALL, worker=first).node["worker"] == 0  # makes the rows
    db.execute(
        f"UPDATE {db.table} SET token = %s, expires_ms = 1 WHERE name = %s AND node = 1",
        ("dead process", "crash"),
    )
    db.execute(
        f"UPDATE {db.table} SET token = %s, expires_ms = 9999999999999 WHERE name = %s "
        "AND node > 1",
        ("live process", "crash"),
    )
    lease = db.lease("crash")
    assert SnowflakeGenerator(SMALL, worker=lease).node["worker"] == 1
    with pytest.raises(WorkerIdsExhaustedError):
        SnowflakeGenerator(SMALL, worker=db.lease("crash")).next_id()
    lease.release()
    first.release()


def test_a_full_range_is_a_clear_error_with_the_count(db: Database) -> None:
    leases = [db.lease("full") for _ in range(4)]
    for lease in leases:
        SnowflakeGenerator(SMALL, worker=lease).next_id()
    with pytest.raises(WorkerIdsExhaustedError) as caught:
        SnowflakeGenerator(SMALL, worker=db.lease("full")).next_id()
    assert caught.value.count == 4 and "all 4 worker ids" in str(caught.value)
    for lease in leases:
        lease.release()


def test_a_stolen_row_is_detected_fenced_and_replaced(db: Database) -> None:
    clock = ManualMonotonicClock()
    lease = db.lease("steal", ttl=0.6, clock=clock)
    gen = SnowflakeGenerator(TWITTER, worker=lease)
    gen.next_id()  # claims worker 0 (the claim is at the first id)
    db.execute(
        f"UPDATE {db.table} SET token = %s WHERE name = %s AND node = 0",
        ("another holder", "steal"),
    )
    clock.advance(0.2)  # the next renewal finds it taken, and claims a fresh id
    assert lease.losses == 1 and lease.claims == 2
    time.sleep(0.002)  # the generator checks its lease at its next millisecond
    assert {TWITTER.decompose(i).worker for i in gen.next_ids(10)} == {1}
    assert rows(db, "steal")[0][0] == "another holder"
    lease.release()


def test_sqlalchemy_engine_and_table(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'sa.sqlite3'}")
    metadata = sa.MetaData()
    table = lease_table(metadata)
    metadata.create_all(engine)
    lease = database_lease(engine, "orders", ttl=5)
    gen = SnowflakeGenerator(TWITTER, worker=lease)
    assert gen.node == {"worker": 0}
    with engine.connect() as conn:
        held = conn.execute(sa.select(table.c.node).where(table.c.token.is_not(None))).all()
    assert held == [(0,)]
    lease.release()
    engine.dispose()


def test_postgres_through_a_sqlalchemy_engine() -> None:
    services.postgres_connection().close()
    engine = sa.create_engine(
        services.POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://")
    )
    name = f"uidf_lease_{uuid.uuid4().hex[:12]}"
    metadata = sa.MetaData()
    lease_table(metadata, name)
    metadata.create_all(engine)
    try:
        leases = [database_lease(engine, "sa", ttl=5, table=name) for _ in range(2)]
        assert [SnowflakeGenerator(TWITTER, worker=x).node["worker"] for x in leases] == [0, 1]
        for lease in leases:
            lease.release()
    finally:
        metadata.drop_all(engine)
        engine.dispose()


def test_unreachable_database_is_a_clear_error() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(CoordinatorUnavailableError) as caught:
        SnowflakeGenerator(TWITTER, worker=DatabaseLease(url, "orders")).next_id()
    message = str(caught.value)
    assert f"127.0.0.1:{url.split(':')[2].split('/')[0]}" in message
    assert "migrate" in message and "FromEnv" in message


def test_missing_table_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(CoordinatorUnavailableError, match="create_table"):
        lease = DatabaseLease(f"sqlite:///{tmp_path}/x.db", "o")
        SnowflakeGenerator(TWITTER, worker=lease).next_id()
