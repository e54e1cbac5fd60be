"""RedisLease: the lowest free id, renewal, release, clear errors, fencing, fork."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.redis_servers import free_port, key_prefix, redis_server
from uid_fields import (
    TWITTER,
    CoordinatorUnavailableError,
    LeaseLostError,
    ManualClock,
    RedisLease,
    ShardedIdGenerator,
    SnowflakeGenerator,
    SnowflakeLayout,
    WorkerIdsExhaustedError,
)
from uid_fields.clock import ManualMonotonicClock
from uid_fields.ids.layouts import INSTAGRAM

URL = services.REDIS_URL
SMALL = SnowflakeLayout(epoch_ms=TWITTER.epoch_ms, fields=(("worker", 2),), sequence_bits=12)


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


def test_claims_the_lowest_free_id_and_node_shows_it(prefix: str) -> None:
    leases = [RedisLease(URL, "orders", ttl=5, prefix=prefix) for _ in range(3)]
    gens = [SnowflakeGenerator(TWITTER, datacenter=1, worker=lease) for lease in leases]
    assert [g.node for g in gens] == [{"datacenter": 1, "worker": w} for w in (0, 1, 2)]
    assert "worker=1" in repr(gens[1])
    client = services.redis_client()
    assert client.get(leases[1].key(1)).decode().split()[2] == f"pid={os.getpid()}"
    leases[1].release()
    # Released, but kept for the clock-skew margin (ttl/4) before anyone may claim it.
    assert 0 < client.pttl(leases[1].key(1)) <= 1250
    again = RedisLease(URL, "orders", ttl=5, prefix=prefix)
    assert SnowflakeGenerator(TWITTER, datacenter=1, worker=again).node["worker"] == 3
    ids = [i for g in (gens[0], gens[2]) for i in g.next_ids(2000)]
    assert len(set(ids)) == 4000
    wait_for(lambda: client.get(leases[1].key(1)) is None)
    later = RedisLease(URL, "orders", ttl=5, prefix=prefix)
    assert SnowflakeGenerator(TWITTER, datacenter=1, worker=later).node["worker"] == 1
    for lease in [*leases, again, later]:
        lease.release()


def test_the_key_is_renewed_before_it_expires(prefix: str) -> None:
    """The real-time end-to-end test of Redis renewals (the others run on a manual clock):
    the renewal thread, on its own, extends the key before it could expire."""
    lease = RedisLease(URL, "renew", ttl=3, prefix=prefix)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    client = services.redis_client()
    claimed = time.monotonic()
    assert 0 < client.pttl(lease.key(0)) <= 3000

    def renewed() -> bool:
        # Unrenewed, the key has ttl - elapsed left; renewed, a whole ttl again.
        return bool(client.pttl(lease.key(0)) > 3000 - (time.monotonic() - claimed) * 1000 + 300)

    wait_for(renewed, timeout=3 * 0.75)  # before the fencing deadline, or it is lost
    assert lease.claims == 1 and lease.losses == 0
    assert lease.seconds_left is not None and 0 < lease.seconds_left <= 3 - 0.75
    lease.release()


def test_renewals_on_a_manual_clock_keep_the_key_for_many_ttls(prefix: str) -> None:
    clock = ManualMonotonicClock()
    lease = RedisLease(URL, "renew", ttl=5, prefix=prefix, clock=clock)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    client = services.redis_client()
    client.pexpire(lease.key(0), 1000)  # as if the last renewal was long ago
    clock.advance(5 / 3)  # one renewal pause
    assert client.pttl(lease.key(0)) > 4000  # renewed: a whole ttl again
    assert lease.seconds_left == pytest.approx(5 - 1.25)  # counted from the renewal
    clock.advance(50)  # ten ttls: thirty renewals
    assert lease.claims == 1 and lease.losses == 0
    assert lease.seconds_left is not None and lease.seconds_left > 5 - 1.25 - 5 / 3
    lease.release()


def test_release_on_garbage_collection(prefix: str) -> None:
    client = services.redis_client()

    def claim() -> str:
        lease = RedisLease(URL, "gc", ttl=30, prefix=prefix)
        assert SnowflakeGenerator(TWITTER, worker=lease).next_id() > 0
        return lease.key(0)

    key = claim()
    gc.collect()
    wait_for(lambda: 0 < client.pttl(key) <= 7500)  # released: only the margin (ttl/4) is left


def test_release_at_exit(prefix: str, tmp_path: Path) -> None:
    script = tmp_path / "hold.py"
    script.write_text(
        "from uid_fields import TWITTER, RedisLease, SnowflakeGenerator\n"
        f"gen = SnowflakeGenerator(TWITTER, worker=RedisLease({URL!r}, 'exit', ttl=30, "
        f"prefix={prefix!r}))\n"
        "print(gen.node['worker'], gen.next_id())\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split()[0] == "0"
    client = services.redis_client()
    # Released by the exiting process: only the clock-skew margin (ttl/4) is left.
    assert 0 < client.pttl(f"{prefix}exit:0") <= 7500


def test_a_full_range_is_a_clear_error_with_the_count(prefix: str) -> None:
    leases = [RedisLease(URL, "full", ttl=5, prefix=prefix) for _ in range(4)]
    assert sorted(SnowflakeGenerator(SMALL, worker=x).node["worker"] for x in leases) == [
        0,
        1,
        2,
        3,
    ]
    with pytest.raises(WorkerIdsExhaustedError) as caught:
        SnowflakeGenerator(SMALL, worker=RedisLease(URL, "full", ttl=5, prefix=prefix)).next_id()
    assert caught.value.count == 4
    assert "all 4 worker ids (0..3)" in str(caught.value)
    for lease in leases:
        lease.release()


def test_unreachable_redis_names_the_url_and_the_fallbacks() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    with pytest.raises(CoordinatorUnavailableError) as caught:
        SnowflakeGenerator(TWITTER, worker=RedisLease(url, "orders")).next_id()
    message = str(caught.value)
    assert f"127.0.0.1:{url.rsplit(':', 1)[1]}" in message
    assert "s3cret" not in message
    assert "worker=3" in message and "FromEnv" in message and "DatabaseLease" in message


def test_one_lease_object_serves_one_field(prefix: str) -> None:
    lease = RedisLease(URL, "one", ttl=5, prefix=prefix)
    with pytest.raises(ValueError, match="one lease object per node field"):
        SnowflakeGenerator(TWITTER, datacenter=lease, worker=lease)
    lease.release()


def test_sharded_generators_share_the_lease_of_their_worker(prefix: str) -> None:
    layout = SnowflakeLayout(
        epoch_ms=INSTAGRAM.epoch_ms, fields=(("shard", 8), ("worker", 5)), sequence_bits=10
    )
    lease = RedisLease(URL, "sharded", ttl=5, prefix=prefix)
    gen = ShardedIdGenerator(layout, worker=lease)
    ids = gen.next_ids(500, shard=1) + gen.next_ids(500, shard=2)
    assert {layout.decompose(i).worker for i in ids} == {0}
    assert len(set(ids)) == 1000
    lease.release()


def test_a_stolen_lease_is_detected_fenced_and_replaced(prefix: str) -> None:
    clock = ManualMonotonicClock()
    lease = RedisLease(URL, "steal", ttl=0.6, prefix=prefix, clock=clock)
    gen = SnowflakeGenerator(TWITTER, worker=lease)
    assert gen.node["worker"] == 0
    client = services.redis_client()
    client.set(lease.key(0), "another holder", px=60_000)  # rewritten by someone else
    clock.advance(0.2)  # the next renewal finds it taken, and claims a fresh id
    assert lease.losses == 1 and lease.claims == 2
    assert client.get(lease.key(0)) == b"another holder"  # ours never deletes theirs
    time.sleep(0.002)  # the generator checks its lease at its next millisecond
    after = gen.next_ids(100)
    assert {TWITTER.decompose(i).worker for i in after} == {1}
    assert gen.node["worker"] == 1
    lease.release()


def test_deadline_fences_before_expiry_and_the_lease_resumes(tmp_path: Path) -> None:
    clock = ManualMonotonicClock()
    ids_clock = ManualClock()
    with redis_server(tmp_path) as server:
        lease = RedisLease(server.url, "fence", ttl=0.6, margin=0.15, clock=clock)
        gen = SnowflakeGenerator(TWITTER, worker=lease, clock=ids_clock)
        issued = [gen.next_id()]
        server.pause()  # the server hangs: renewals time out
        for _ in range(8):  # 0.4 s: short of the deadline, ttl - margin after the claim
            clock.advance(0.05)
            ids_clock.advance_ms(1)
            issued.append(gen.next_id())
        clock.advance(0.06)  # past it
        ids_clock.advance_ms(1)
        with pytest.raises(LeaseLostError, match="not renewed") as caught:
            gen.next_id()
        with pytest.raises(LeaseLostError):
            gen.next_ids(10)  # no id while fenced
        assert "fence" in str(caught.value) and lease.losses <= 1
        server.resume()
        # Resumed: the renewal re-took its id (the key expired, nobody took it) or a
        # fresh claim replaced it; either way the generator issues again.
        clock.advance(0.2)
        assert (lease.seconds_left or 0) > 0
        ids_clock.advance_ms(1)
        resumed = gen.next_ids(100)
        assert gen.node["worker"] == lease.value
        assert len(set(issued + resumed)) == len(issued) + 100
        lease.release()
