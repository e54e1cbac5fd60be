"""A parent holding a lease forks 4 children: each re-leases its own worker id."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests import services
from tests.core.test_fork import run_in_children
from tests.redis_servers import key_prefix
from uid_fields import TWITTER, DatabaseLease, RedisLease, SnowflakeGenerator

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def fork_and_check(gen: SnowflakeGenerator) -> None:
    parent = gen.next_ids(20_000)

    def child() -> dict[str, object]:
        ids = [gen.next_id() for _ in range(10_000)] + gen.next_ids(10_000)
        return {"worker": gen.node["worker"], "ids": ids}

    results = run_in_children(4, child)
    oks = [r["ok"] for r in results]  # type: ignore[index]
    assert all("error" not in r for r in results), results
    assert sorted(o["worker"] for o in oks) == [1, 2, 3, 4]  # the parent keeps 0
    assert gen.node["worker"] == 0
    everything = parent + [i for o in oks for i in o["ids"]] + gen.next_ids(20_000)
    assert len(set(everything)) == len(everything) == 120_000
    for o in oks:
        assert {TWITTER.decompose(i).worker for i in o["ids"]} == {o["worker"]}


def test_forked_children_re_lease_from_redis(prefix: str) -> None:
    lease = RedisLease(services.REDIS_URL, "fork", ttl=10, prefix=prefix)
    fork_and_check(SnowflakeGenerator(TWITTER, datacenter=3, worker=lease))
    client = services.redis_client()
    assert client.get(lease.key(0)) is not None  # children never release the parent's id
    lease.release()


def test_forked_children_re_lease_from_postgres() -> None:
    conn = services.postgres_connection()
    table = f"uidf_fork_{uuid.uuid4().hex[:10]}"
    lease = DatabaseLease(services.POSTGRES_URL, "fork", ttl=10, table=table)
    lease.create_table()
    try:
        fork_and_check(SnowflakeGenerator(TWITTER, worker=lease))
        # The parent's connection survived its children: it still renews.
        assert lease._state.tick() is True
        lease.release()
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.close()
