"""The documented sharded configuration across processes: no duplicate ids.

Two processes make Instagram-style ids of one logical shard from the README's settings
entry (a sequence shared through Redis). Without it they would repeat each other's ids,
which the settings checks refuse (E016) unless one process is declared.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import services
from tests.redis_servers import key_prefix
from tests.stress.procs import BARRIER, QUEUE, run_together, sharded_settings_worker

PROCESSES, SINGLES, BLOCKS = 2, 20_000, 36  # 400,000 ids


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def test_two_processes_on_one_shard_with_the_documented_settings(prefix: str) -> None:
    services.redis_client().close()
    config = {
        "kind": "sharded",
        "layout": "instagram",
        "epoch": "2024-01-01T00:00:00Z",
        "sequence": {"redis": services.REDIS_URL, "prefix": prefix},
    }
    results = run_together(
        sharded_settings_worker, (config, 5, BARRIER, QUEUE, SINGLES, BLOCKS), PROCESSES
    )
    assert not [r["error"] for r in results if "error" in r]
    ids = [i for r in results for i in r["ids"]]
    assert len(ids) == PROCESSES * (SINGLES + BLOCKS * 5000) == 400_000
    assert len(set(ids)) == len(ids)  # zero duplicates
