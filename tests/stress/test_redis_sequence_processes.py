"""8 processes sharing one node id through RedisSequence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests import services
from tests.redis_servers import key_prefix
from tests.stress.procs import BARRIER, QUEUE, run_together, shared_sequence_worker
from uid_fields import TWITTER

PROCESSES, SINGLES, BLOCKS = 8, 1500, 3


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def test_8_processes_share_worker_5_without_duplicates(prefix: str) -> None:
    services.redis_client().close()
    results = run_together(
        shared_sequence_worker,
        (services.REDIS_URL, prefix, BARRIER, QUEUE, SINGLES, BLOCKS),
        PROCESSES,
    )
    assert not [r["error"] for r in results if "error" in r]
    ids = [i for r in results for i in r["ids"]]
    assert len(ids) == PROCESSES * (SINGLES + BLOCKS * 5000)
    assert len(set(ids)) == len(ids)  # zero duplicates
    parts = [TWITTER.decompose(i) for i in ids]
    assert {p.worker for p in parts} == {5}  # sequence 4096 never bled into the worker
    per_unit = Counter(p.timestamp_ms for p in parts)
    assert max(per_unit.values()) == 4096  # full units: sequences 0..4095, and no more
    assert max(p.sequence for p in parts) == 4095
