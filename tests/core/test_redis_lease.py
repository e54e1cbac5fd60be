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
    RedisLease,
    ShardedIdGenerator,
    SnowflakeGenerator,
    SnowflakeLayout,
    WorkerIdsExhaustedError,
)
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
    lease = RedisLease(URL, "renew", ttl=0.6, prefix=prefix)
    SnowflakeGenerator(TWITTER, worker=lease)
    client = services.redis_client()
    assert 0 < client.pttl(lease.key(0)) <= 600
    time.sleep(1.5)  # 2.5 ttls: without renewals the key would be gone
    assert client.pttl(lease.key(0)) > 0
    assert lease.claims == 1 and lease.losses == 0
    assert lease.seconds_left is not None and 0 < lease.seconds_left <= 0.6 - 0.15
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
        SnowflakeGenerator(SMALL, worker=RedisLease(URL, "full", ttl=5, prefix=prefix))
    assert caught.value.count == 4
    assert "all 4 worker ids (0..3)" in str(caught.value)
    for lease in leases:
        lease.release()


def test_unreachable_redis_names_the_url_and_the_fallbacks() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    with pytest.raises(CoordinatorUnavailableError) as caught:
        SnowflakeGenerator(TWITTER, worker=RedisLease(url, "orders"))
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
    lease = RedisLease(URL, "steal", ttl=0.6, prefix=prefix)
    gen = SnowflakeGenerator(TWITTER, worker=lease)
    assert gen.node["worker"] == 0
    client = services.redis_client()
    client.set(lease.key(0), "another holder", px=60_000)  # rewritten by someone else
    wait_for(lambda: lease.losses == 1)
    assert client.get(lease.key(0)) == b"another holder"  # ours never deletes theirs
    time.sleep(0.01)
    after = gen.next_ids(100)
    assert {TWITTER.decompose(i).worker for i in after} == {1}
    assert gen.node["worker"] == 1 and lease.claims == 2
    lease.release()


def test_deadline_fences_before_expiry_and_the_lease_resumes(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        lease = RedisLease(server.url, "fence", ttl=0.6, margin=0.15)
        gen = SnowflakeGenerator(TWITTER, worker=lease)
        gen.next_id()
        server.pause()  # the server hangs: renewals time out
        paused = time.monotonic()
        issued: list[int] = []
        with pytest.raises(LeaseLostError, match=r"not renewed for 0\.45 s") as caught:
            while time.monotonic() - paused < 2:
                issued.append(gen.next_id())
        fenced_after = time.monotonic() - paused
        assert fenced_after < 0.6  # before the key could expire, counted from the pause
        with pytest.raises(LeaseLostError):
            gen.next_ids(10)  # no id while fenced
        assert "fence" in str(caught.value)
        server.resume()
        # Resumed: the renewal re-took its id (the key expired, nobody took it) or a
        # fresh claim replaced it; either way the generator issues again.
        wait_for(lambda: (lease.seconds_left or 0) > 0)
        resumed = gen.next_ids(100)
        assert gen.node["worker"] == lease.value
        assert len(set(issued + resumed)) == len(issued) + 100
        lease.release()
