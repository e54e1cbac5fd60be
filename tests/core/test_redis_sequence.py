"""RedisSequence: a Redis counter per (node, time unit), shared by processes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests import services
from tests.core.test_fork import run_in_children
from tests.php_fleet import POST_LUA, php_base
from tests.redis_servers import free_port, key_prefix
from uid_fields import (
    PHP_REDIS,
    TWITTER,
    ClockMovedBackwardsError,
    CoordinatorUnavailableError,
    ManualClock,
    RedisSequence,
    SnowflakeGenerator,
)
from uid_fields.config import build_generator

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
    # A single id reserves a block of 8: 4095 is the one of its block below the limit,
    # and the next unit's block starts at 0.
    assert [v for _, v in unit_keys] == [4095 + seq.block, seq.block]


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


# -- mode="php": the PHP+Redis fleet's keys and counters --------------------------------


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def test_php_mode_uses_the_originals_key_and_first_sequence(prefix: str) -> None:
    seq = RedisSequence(URL, mode="php", prefix=prefix)
    gen = SnowflakeGenerator(PHP_REDIS, server=3, worker=4, sequence=seq)
    value = gen.next_id()
    parts = PHP_REDIS.decompose(value)
    assert (parts.server, parts.worker, parts.sequence) == (3, 4, 1)  # PHP's first is 1
    base = php_base(parts.timestamp_ms, 3, 4)
    assert value == base | 1
    assert counters(prefix) == {f"{prefix}{base}": 1}  # the key is the id without sequence


def test_php_mode_continues_the_counter_php_processes_started(prefix: str) -> None:
    client = services.redis_client()
    post = client.register_script(POST_LUA)
    seq = RedisSequence(URL, mode="php", prefix=prefix)
    base = php_base(now_ms(), 1, 2)
    key = f"{prefix}{base}"
    # One MULTI block: the post sets a 1 ms expiry, which a loaded machine could let pass
    # between the posts and the longer expiry this test needs.
    pipe = client.pipeline(transaction=True)
    for _ in range(5):
        post(keys=[key], client=pipe)
    pipe.pexpire(key, 60_000)
    php_ids = [base | int(value) for value in pipe.execute()[:5]]
    assert [i - base for i in php_ids] == [1, 2, 3, 4, 5]
    ours = seq.reserve("unused", 0, 3, 4096, base=base, last_ms=now_ms() + 60_000)
    assert list(ours) == [6, 7, 8]
    assert int(post(keys=[key])) == 9  # and PHP goes on after ours
    assert len({*php_ids, *(base | s for s in ours)}) == 8


def test_php_mode_never_uses_4096_and_never_shortens_the_expiry(prefix: str) -> None:
    client = services.redis_client()
    seq = RedisSequence(URL, mode="php", prefix=prefix)
    far = now_ms() + 60_000
    client.set(f"{prefix}100", 4093, px=30_000)
    assert seq.reserve("unused", 0, 5, 4096, base=100, last_ms=far) == range(4094, 4096)
    assert seq.reserve("unused", 0, 1, 4096, base=100, last_ms=far) == range(0)
    assert client.pttl(f"{prefix}100") > 20_000  # not cut to key_ttl_ms, nor to 1 ms
    client.set(f"{prefix}200", 7, px=1)
    client.pexpire(f"{prefix}200", 60_000)
    seq.reserve("unused", 0, 1, 4096, base=200, last_ms=far)
    client.set(f"{prefix}300", 7)
    client.pexpire(f"{prefix}300", 1_000)
    seq.reserve("unused", 0, 1, 4096, base=300, last_ms=far)
    assert 9_000 < client.pttl(f"{prefix}300") <= seq.key_ttl_ms  # raised to key_ttl_ms


def test_php_mode_never_restarts_a_counter_that_may_have_expired(prefix: str) -> None:
    """A millisecond already over by Redis's clock, with no counter: PHP may have used it.

    The original's counter lives 1 ms, so a PHP process may have issued sequences 1..n
    of that millisecond and let the key expire; starting it again at 1 would repeat them.
    """
    client = services.redis_client()
    seq = RedisSequence(URL, mode="php", prefix=prefix)
    past = now_ms() - 50
    assert seq.reserve("unused", 0, 1, 4096, base=400, last_ms=past) == range(0)
    assert client.exists(f"{prefix}400") == 0  # nothing started
    client.set(f"{prefix}500", 3, px=60_000)  # a live counter may go on, late or not
    assert seq.reserve("unused", 0, 1, 4096, base=500, last_ms=past) == range(4, 5)
    with pytest.raises(ClockMovedBackwardsError, match="behind the Redis server"):
        seq.reserve("unused", 0, 1, 4096, base=600, last_ms=now_ms() - 5_000)


def test_php_mode_generators_wait_out_a_lost_millisecond(prefix: str) -> None:
    clock = ManualClock(now_ms() - 20)  # 20 ms behind Redis: each unit is already over
    seq = RedisSequence(URL, mode="php", prefix=prefix)
    gen = SnowflakeGenerator(PHP_REDIS, server=1, worker=1, sequence=seq, clock=clock)
    value = gen.next_id()  # the manual clock jumps on each wait, past Redis's
    assert PHP_REDIS.decompose(value).sequence == 1
    assert len(clock.waits) >= 10  # one refused unit after another until it caught up


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "python"}, "mode must be one of uid_fields, php"),
        ({"max_lag_ms": 0}, "max_lag_ms must be >= 1"),
        ({"prefix": 5}, "prefix must be a string"),
    ],
)
def test_php_mode_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        RedisSequence(URL, **options)  # type: ignore[arg-type]


def test_php_mode_from_settings(prefix: str) -> None:
    gen = build_generator(
        "fleet",
        {
            "kind": "snowflake",
            "layout": "php_redis",
            "fields": {"server": 3, "worker": 7},
            "sequence": {"redis": URL, "mode": "php", "prefix": prefix},
        },
    )
    value = gen.next_id()
    assert PHP_REDIS.decompose(value).sequence == 1
    assert counters(prefix) == {f"{prefix}{value - 1}": 1}


def test_a_burst_of_single_ids_reserves_blocks(prefix: str) -> None:
    """Many next_id() calls in a burst (objects built one by one) make at most one round
    trip per 5 ids: each reservation is a block, handed out without Redis until the unit
    ends (before: one round trip per id). Two processes' blocks never overlap."""
    clock = ManualClock(1_767_225_600_000)
    one = RedisSequence(URL, prefix=prefix)
    other = RedisSequence(URL, prefix=prefix)
    a = SnowflakeGenerator(TWITTER, datacenter=1, worker=1, sequence=one, clock=clock)
    b = SnowflakeGenerator(TWITTER, datacenter=1, worker=1, sequence=other, clock=clock)
    ids = []
    for step in range(1000):
        ids.append((a if step % 3 else b).next_id())
        if step % 100 == 99:
            clock.advance_ms(1)
    assert len(set(ids)) == 1000
    assert one.round_trips + other.round_trips <= 200
    # What a unit leaves unused is bounded: at most block - 1 per generator and unit.
    units = 10
    assert sum(counters(prefix).values()) - 1000 <= 2 * units * (one.block - 1)


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2-pass@127.0.0.1:1/0",
        "redis://user:hunter2-pass@127.0.0.1:1/0",
        "redis://127.0.0.1:1/0?password=hunter2-pass",
    ],
)
def test_an_unreachable_redis_is_named_without_its_password(url: str) -> None:
    """Nothing answers on port 1: the sequence cannot be made, and says where, but not
    with which password (issue 37, item 4)."""
    with pytest.raises(CoordinatorUnavailableError) as raised:
        RedisSequence(url, timeout=0.2)
    assert "hunter2-pass" not in str(raised.value) and "127.0.0.1:1" in str(raised.value)
