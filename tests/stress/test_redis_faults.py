"""Redis dies under running generators; a lease is stolen under load."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.redis_servers import key_prefix, redis_server
from uid_fields import TWITTER, LeaseLostError, RedisLease, SnowflakeGenerator

TTL, MARGIN = 1.5, 0.375


class Runner:
    """A thread making ids with one generator, recording what it issued and when."""

    def __init__(self, gen: SnowflakeGenerator, lease: RedisLease) -> None:
        self.gen, self.lease = gen, lease
        self.batches: list[tuple[float, int, list[int]]] = []  # (monotonic, claims, ids)
        self.fenced_at: float | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            claims = self.lease.claims
            try:
                ids = self.gen.next_ids(50)
            except LeaseLostError:
                if self.fenced_at is None:
                    self.fenced_at = time.monotonic()
            else:
                self.batches.append((time.monotonic(), claims, ids))
            time.sleep(0.002)


def test_killed_redis_fences_within_the_ttl_and_a_restart_recovers(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        runners = []
        for _ in range(3):
            lease = RedisLease(server.url, "kill", ttl=TTL, margin=MARGIN)
            runners.append(Runner(SnowflakeGenerator(TWITTER, worker=lease), lease))
        assert sorted(r.gen.node["worker"] for r in runners) == [0, 1, 2]
        for runner in runners:
            runner.thread.start()
        time.sleep(0.5)
        server.kill()
        killed = time.monotonic()
        killed_ms = time.time() * 1000
        time.sleep(TTL + 0.2)
        for runner in runners:
            assert runner.fenced_at is not None
            assert runner.fenced_at - killed < TTL - MARGIN + 0.05  # stopped within the ttl
            # Nothing was issued after fencing, and no id is stamped after the deadline.
            first_claim = [b for b in runner.batches if b[1] == 1]
            assert max(t for t, _, _ in first_claim) < runner.fenced_at + 0.005
            last_ms = max(TWITTER.decompose(i).timestamp_ms for _, _, b in first_claim for i in b)
            assert last_ms < killed_ms + (TTL - MARGIN) * 1000 + 2
            assert not [b for b in runner.batches if b[0] > runner.fenced_at + 0.005]
        server.start()  # empty: every id is free again
        restarted = time.monotonic()
        deadline = restarted + 5
        while not all(any(b[0] > restarted for b in r.batches) for r in runners):
            assert time.monotonic() < deadline, "generators did not recover"
            time.sleep(0.05)
        for runner in runners:
            runner.stop.set()
            runner.thread.join(5)
            assert runner.lease.claims == 2  # resumed with a freshly claimed id
        ids = [i for r in runners for _, _, b in r.batches for i in b]
        assert len(set(ids)) == len(ids)
        assert sorted(r.gen.node["worker"] for r in runners) == [0, 1, 2]
        for runner in runners:
            runner.lease.release()


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def test_a_lease_stolen_under_load_is_fenced(prefix: str) -> None:
    url = services.REDIS_URL
    victim_lease = RedisLease(url, "steal", ttl=0.9, prefix=prefix)
    other_lease = RedisLease(url, "steal", ttl=0.9, prefix=prefix)
    victim = Runner(SnowflakeGenerator(TWITTER, worker=victim_lease), victim_lease)
    other = Runner(SnowflakeGenerator(TWITTER, worker=other_lease), other_lease)
    assert (victim.gen.node["worker"], other.gen.node["worker"]) == (0, 1)
    victim.thread.start()
    other.thread.start()
    time.sleep(0.2)
    services.redis_client().set(victim_lease.key(0), "thief", px=60_000)
    # A hang guard only (the renewal pause is 0.3 s): what the theft costs is asserted
    # below, on the ids made after it.
    deadline = time.monotonic() + 30
    while victim_lease.losses == 0:
        assert time.monotonic() < deadline, "theft not detected"
        time.sleep(0.005)
    detected = time.monotonic()
    # The thief now issues ids as worker 0.
    thief = SnowflakeGenerator(TWITTER, worker=0)
    thief_ids = [thief.next_id() for _ in range(5000)]
    time.sleep(0.2)
    for runner in (victim, other):
        runner.stop.set()
        runner.thread.join(5)
    late = [i for t, _, b in victim.batches if t > detected + 0.005 for i in b]
    assert late and {TWITTER.decompose(i).worker for i in late} == {2}  # a fresh id
    assert victim.gen.node["worker"] == 2 and victim_lease.claims == 2
    ids = [i for r in (victim, other) for _, _, b in r.batches for i in b]
    assert len(set(ids + thief_ids)) == len(ids) + len(thief_ids)
    victim_lease.release()
    other_lease.release()


def test_a_child_forked_while_redis_is_down_recovers_when_it_returns(tmp_path: Path) -> None:
    import json
    import os

    with redis_server(tmp_path) as server:
        lease = RedisLease(server.url, "forkdown", ttl=TTL, margin=MARGIN)
        gen = SnowflakeGenerator(TWITTER, worker=lease)
        parent_ids = gen.next_ids(10)
        server.kill()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: fenced at first, then a fresh id once Redis is back
            os.close(read)
            report: dict[str, object] = {"fenced": 0}
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    report["ids"] = gen.next_ids(10)
                    report["worker"] = gen.node["worker"]
                    break
                except LeaseLostError:
                    report["fenced"] = int(report["fenced"]) + 1  # type: ignore[call-overload]
                    time.sleep(0.05)
            with os.fdopen(write, "w") as pipe:
                json.dump(report, pipe)
            os._exit(0)
        os.close(write)
        time.sleep(0.5)
        server.start()  # the same port
        with os.fdopen(read) as pipe:
            report = json.load(pipe)
        os.waitpid(pid, 0)
    assert report["fenced"] > 0  # it did not reuse the parent's id while Redis was away
    assert "ids" in report, report
    assert not set(report["ids"]) & set(parent_ids)
