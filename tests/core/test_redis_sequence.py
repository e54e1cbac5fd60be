"""RedisSequence: a Redis counter per (node, time unit), shared by processes."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import services
from tests.core.test_fork import run_in_children
from tests.redis_servers import free_port, key_prefix
from uid_fields import (
    TWITTER,
    CoordinatorUnavailableError,
    ManualClock,
    RedisSequence,
    SnowflakeGenerator,
)

URL = services.REDIS_URL


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def counters(prefix: str) -> dict[str, int]:
    client = services.redis_client()
    return {k.decode(): int(client.get(k)) for k in client.scan_iter(match=f"{prefix}*")}


def test_sequence_4095_is_the_last_of_a_unit_and_4096_waits(prefix: str) -> None:
    clock = ManualClock()
    seq = RedisSequence(URL, prefix=prefix)
    gen = SnowflakeGenerator(TWITTER, worker=3, sequence=seq, clock=clock)
    head = [TWITTER.decompose(i) for i in gen.next_ids(4095)]  # sequences 0..4094
    assert [p.sequence for p in head] == list(range(4095))
    last = TWITTER.decompose(gen.next_id())
    assert (last.sequence, last.worker) == (4095, 3)
    assert last.timestamp_ms == head[0].timestamp_ms
    assert clock.waits == []
    after = TWITTER.decompose(gen.next_id())  # counter 4096 is not an id: wait a unit
    assert (after.sequence, after.worker) == (0, 3)  # the `>` bug made worker 4 here
    assert after.timestamp_ms == last.timestamp_ms + 1
    assert len(clock.waits) == 1
    unit_keys = sorted(counters(prefix).items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]))
    assert [v for _, v in unit_keys] == [4096, 1]  # 4096 was never asked for


def test_reserve_clips_at_the_limit(prefix: str) -> None:
    seq = RedisSequence(URL, prefix=prefix)
    client = services.redis_client()
    client.set(seq.key("space", 5), 4094)
    assert seq.reserve("space", 5, 5, 4096) == range(4094, 4096)
    assert seq.reserve("space", 5, 1, 4096) == range(0)
    client.set(seq.key("space", 6), 4095)
    assert seq.reserve("space", 6, 1, 4096) == range(4095, 4096)
    assert seq.reserve("space", 6, 1, 4096) == range(0)
    assert 0 < client.pttl(seq.key("space", 6)) <= seq.key_ttl_ms


def test_next_ids_reserves_a_block_in_one_round_trip(prefix: str) -> None:
    clock = ManualClock()
    seq = RedisSequence(URL, prefix=prefix)
    gen = SnowflakeGenerator(TWITTER, worker=3, sequence=seq, clock=clock)
    ids = gen.next_ids(1000)
    assert seq.round_trips == 1
    assert [TWITTER.decompose(i).sequence for i in ids] == list(range(1000))
    more = gen.next_ids(4000)  # 3096 left in this unit, the rest in the next
    assert seq.round_trips == 3
    assert len(set(ids + more)) == 5000
    assert {TWITTER.decompose(i).worker for i in more} == {3}


def test_generators_sharing_a_node_id_never_collide(prefix: str) -> None:
    clock = ManualClock(step_ns=20_000)
    a = SnowflakeGenerator(
        TWITTER, worker=3, sequence=RedisSequence(URL, prefix=prefix), clock=clock
    )
    b = SnowflakeGenerator(
        TWITTER, worker=3, sequence=RedisSequence(URL, prefix=prefix), clock=clock
    )
    ids: list[int] = []
    for _ in range(300):
        ids += [a.next_id(), b.next_id(), *a.next_ids(7), *b.next_ids(5)]
    assert len(set(ids)) == len(ids) == 300 * 14


def test_forked_children_may_share_the_node_id(prefix: str) -> None:
    gen = SnowflakeGenerator(TWITTER, worker=3, sequence=RedisSequence(URL, prefix=prefix))
    parent = gen.next_ids(2000)
    results = run_in_children(3, lambda: (os.getpid(), gen.next_ids(2000)))
    child_ids = [i for r in results for i in r["ok"][1]]  # type: ignore[index]
    everything = parent + child_ids + gen.next_ids(10)
    assert len(set(everything)) == len(everything) == 8010
    assert {TWITTER.decompose(i).worker for i in everything} == {3}


def test_unreachable_redis_is_a_clear_error() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(CoordinatorUnavailableError, match=url):
        RedisSequence(url)
