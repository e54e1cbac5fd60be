"""What leases and Redis sequences log, on which logger and at which level.

The events of docs/logging.md, made to happen on real coordinators (throwaway Redis
servers, the shared Redis, the lease databases); the leases run on a manual monotonic
clock where the event is a matter of time (a quarantine, a renewal that fails until the
deadline). Other areas' events are tested with their own tests (fan-out, moves, next_id
installs in tests/sqlalchemy/test_logging.py, two-phase commit in test_twophase.py).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.core.lease_databases import Database
from tests.redis_servers import free_port, key_prefix, redis_server
from uid_fields import (
    INSTAGRAM,
    PHP_REDIS,
    TWITTER,
    CoordinatorUnavailableError,
    LeaseLostError,
    ManualClock,
    RedisLease,
    RedisSequence,
    ShardedIdGenerator,
    ShardMap,
    SnowflakeGenerator,
)
from uid_fields._internal.hashing import mix64
from uid_fields.clock import ManualMonotonicClock
from uid_fields.placement import ByField, Placement


def events(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[str, str]]:
    """(level name, message) of every record of ``logger``, in order."""
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == logger]


def levels(caplog: pytest.LogCaptureFixture, logger: str, pattern: str) -> list[str]:
    """The level names of the records of ``logger`` whose message matches ``pattern``."""
    return [level for level, message in events(caplog, logger) if re.search(pattern, message)]


@pytest.fixture(autouse=True)
def capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="uid_fields")


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


# -- uid_fields.leases ---------------------------------------------------------------------
def test_a_claim_is_info_with_the_node_id_and_a_release_too(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = RedisLease(services.REDIS_URL, "logged", ttl=5, prefix=prefix)
    second = RedisLease(services.REDIS_URL, "logged", ttl=5, prefix=prefix)
    SnowflakeGenerator(TWITTER, worker=first).next_id()
    SnowflakeGenerator(TWITTER, worker=second).next_id()
    assert levels(caplog, "uid_fields.leases", r"'logged' on Redis .*\(worker 0\): claimed") == [
        "INFO"
    ]
    assert levels(caplog, "uid_fields.leases", r"\(worker 1\): claimed") == ["INFO"]
    second.release()
    assert levels(caplog, "uid_fields.leases", r"\(worker 1\): released") == ["INFO"]
    first.release()


def test_the_quarantine_wait_of_a_first_id_is_a_warning_with_the_wait(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The first next_id() after the coordinator restarted blocks: the log says how long."""
    clock = ManualMonotonicClock()
    with redis_server(tmp_path) as server:  # just started: its state is younger than ttl
        lease = RedisLease(server.url, "young", ttl=2, margin=0.5, clock=clock)
        SnowflakeGenerator(TWITTER, worker=lease).next_id()
        waited = clock.now() - 1000.0
        warnings = [m for level, m in events(caplog, "uid_fields.leases") if level == "WARNING"]
        assert len(warnings) == 1 and "(worker 0): the first id waits" in warnings[0]
        shown = float(re.findall(r"waits ([0-9.]+) s", warnings[0])[0])
        assert 1.0 < shown <= 2.5 and shown == pytest.approx(waited, abs=0.01)
        assert "lost its lease records" in warnings[0]
        assert levels(caplog, "uid_fields.leases", "in use after its quarantine") == ["INFO"]
        lease.release()


def test_each_failed_renewal_is_a_warning_and_the_lost_lease_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualMonotonicClock()
    with redis_server(tmp_path) as server:
        time.sleep(0.01)
        lease = RedisLease(server.url, "flaky", ttl=0.6, margin=0.15, clock=clock)
        gen = SnowflakeGenerator(TWITTER, worker=lease, clock=ManualClock())
        gen.next_id()  # claims (at the first id)
        caplog.clear()
        server.pause()  # renewals time out from now on
        clock.advance(0.4)  # two renewals fail; 0.45 s after the claim is its deadline
        failed = [m for level, m in events(caplog, "uid_fields.leases") if "renewal failed" in m]
        assert len(failed) >= 2
        assert levels(caplog, "uid_fields.leases", "renewal failed") == ["WARNING"] * len(failed)
        assert re.search(r"\(worker 0\): renewal failed \(.*\); 0\.[0-9]+ s left", failed[-1])
        assert not levels(caplog, "uid_fields.leases", "lost")
        clock.advance(0.2)  # past the deadline
        assert levels(caplog, "uid_fields.leases", r"\(worker 0\): lost: .*not renewed") == [
            "ERROR"
        ]
        with pytest.raises(LeaseLostError):
            gen.next_ids(1)
        # Meanwhile it keeps trying to claim a fresh id, and says so each time.
        assert "WARNING" in levels(caplog, "uid_fields.leases", "cannot claim an id")
        server.resume()
        lease.release()


def test_a_lease_that_cannot_claim_warns_with_its_advice_once_then_once_an_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The renewer retries a claim every ttl / 6; the WARNING says so with the whole
    advice once, then at most once per ``CLAIM_WARNING_INTERVAL_S`` (60 s on the lease's
    clock), short, with the count of attempts that failed in between."""
    clock = ManualMonotonicClock()
    lease = RedisLease(f"redis://127.0.0.1:{free_port()}/0", "down", ttl=30, clock=clock)
    gen = SnowflakeGenerator(TWITTER, worker=lease, clock=ManualClock())
    with pytest.raises(CoordinatorUnavailableError, match="FromEnv"):
        gen.next_id()  # the caller of the first id gets the whole error; the renewer retries
    assert not levels(caplog, "uid_fields.leases", "cannot claim an id")
    for _ in range(26):  # 130 s on the lease's clock: 25 failed claims in the renewer
        clock.advance(5)
    warned = [(level, m) for level, m in events(caplog, "uid_fields.leases") if "cannot claim" in m]
    assert {level for level, _ in warned} == {"WARNING"}
    assert 2 <= len(warned) <= 3  # at 10 s, then 60 s apart at most (not one per retry)
    first, *later = [m for _, m in warned]
    assert "FromEnv" in first and "Connection refused" in first  # the advice, once
    for message in later:
        assert "FromEnv" not in message and len(message) < 300
        assert "Connection refused" in message
        assert re.search(r"\b1[0-2] more attempts failed in the last 6\d s", message)
    with pytest.raises(CoordinatorUnavailableError):
        gen.next_id()
    lease.release()


def test_a_stolen_database_lease_is_an_error_then_a_fresh_claim(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualMonotonicClock()
    lease = db.lease("stolen", ttl=0.6, clock=clock)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    db.execute(
        f"UPDATE {db.table} SET token = %s WHERE name = %s AND node = 0", ("thief", "stolen")
    )
    clock.advance(0.2)
    assert levels(caplog, "uid_fields.leases", r"\(worker 0\): lost: another holder") == ["ERROR"]
    assert levels(caplog, "uid_fields.leases", r"\(worker 1\): claimed \(claim 2") == ["INFO"]
    lease.release()


def test_a_quarantined_re_claim_is_a_warning(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """Lease rows deleted under a live holder that then loses its id: its fresh claim is
    quarantined, and the log says the ids stay stopped, and for how long."""
    clock = ManualMonotonicClock()
    lease = db.lease("wiped", ttl=2, margin=0.5, clock=clock)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    db.execute(f"DELETE FROM {db.table}", ())  # the state marker too
    clock.advance(0.7)  # the renewal re-takes its id: no loss
    assert not levels(caplog, "uid_fields.leases", "lost")
    db.execute(
        f"UPDATE {db.table} SET token = %s, expires_ms = %s WHERE name = %s AND node = 0",
        ("thief", int(time.time() * 1000) + 60_000, "wiped"),
    )
    clock.advance(0.7)  # taken: lost, and the fresh claim waits out the young state
    assert levels(caplog, "uid_fields.leases", "lost: another holder") == ["ERROR"]
    stopped = levels(caplog, "uid_fields.leases", r"ids stay stopped for another [0-9.]+ s")
    assert stopped == ["WARNING"]
    lease.release()


# -- uid_fields.sequences ------------------------------------------------------------------
def test_an_unreachable_redis_sequence_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(CoordinatorUnavailableError):
        RedisSequence(url)
    assert levels(caplog, "uid_fields.sequences", rf"127\.0\.0\.1:{url.split(':')[2]}") == [
        "WARNING"
    ]


def test_a_redis_sequence_that_goes_away_is_a_warning_per_failed_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server(tmp_path) as server:
        gen = SnowflakeGenerator(TWITTER, worker=1, sequence=RedisSequence(server.url))
        gen.next_ids(10)
        server.kill()
        for _ in range(2):
            with pytest.raises(CoordinatorUnavailableError):
                gen.next_ids(10)
        assert levels(caplog, "uid_fields.sequences", "cannot reach Redis") == ["WARNING"] * 2


def test_a_php_sequence_falling_back_to_later_units_is_one_warning(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(int(time.time() * 1000) - 20)  # behind Redis: units are over
    seq = RedisSequence(services.REDIS_URL, mode="php", prefix=prefix)
    gen = SnowflakeGenerator(PHP_REDIS, server=1, worker=1, sequence=seq, clock=clock)
    gen.next_id()
    assert len(clock.waits) >= 10  # many refused units ...
    warned = levels(caplog, "uid_fields.sequences", r"behind the Redis server")
    assert warned == ["WARNING"]  # ... and one line about them (at most one a minute)


# -- uid_fields.placement ------------------------------------------------------------------
def test_new_rows_steered_off_a_closed_database_are_info_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    databases = ["shard_0", "shard_1", "shard_2", "shard_3"]
    shard_map = ShardMap(databases, route=ByField(INSTAGRAM, "shard"), closed=("shard_0",))
    placement = Placement(ShardedIdGenerator(INSTAGRAM), shard_map, name="Photo")
    keys = [k for k in range(4000) if shard_map.database(mix64(k) % 8192) == "shard_0"][:20]
    assert len(keys) == 20
    for key in keys:
        assert placement.database_of(placement.new_id(key)) != "shard_0"
    placement.new_ids(5)  # keyless rows: open databases only, nothing to say
    assert levels(caplog, "uid_fields.placement", r"Photo: .*closed database shard_0") == ["INFO"]
