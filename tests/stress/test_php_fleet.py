"""A Python service joins a running PHP+Redis fleet with the same server and worker.

Two PHP processes (the post's Lua script, run in a throwaway Redis) and one Python
process make 10,000 ids each at the same time, all with server 3 and worker 7. With this
library's own keys the Python process starts every millisecond's counter again at 0
beside PHP's, and the ids collide. With ``mode="php"`` it shares PHP's counters.

The post's script lets a counter expire 1 ms after each call, so a PHP process delayed
more than that between reading its clock and calling Redis starts a millisecond's
counter again and repeats that millisecond's sequences: PHP's own race, with or without
Python. Every start of a counter hands out sequence 1, so those milliseconds are the ones
where sequence 1 was issued twice; outside them there must be no duplicate at all. With
the script's expiry raised (what docs/workers.md tells a PHP fleet to change), there must
be none anywhere.
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from tests.redis_servers import redis_server
from tests.stress.procs import php_fleet_worker
from uid_fields import PHP_REDIS

PER_PROCESS = 10_000


def run_fleet(url: str, mode: str, php: str = "php") -> tuple[list[int], list[int]]:
    """The ids of two PHP processes and of one Python process, made at the same time."""
    roles = (php, php, "python")
    with ProcessPoolExecutor(len(roles), mp_context=get_context("spawn")) as pool:
        start_at = time.time() + 2.0  # time for the spawned interpreters to import
        futures = [
            pool.submit(php_fleet_worker, role, url, mode, 3, 7, start_at, PER_PROCESS)
            for role in roles
        ]
        packed = [f.result(timeout=120) for f in futures]
    per_role = [array("q", p).tolist() for p in packed]
    return per_role[0] + per_role[1], per_role[2]


class Outcome:
    def __init__(self, php: list[int], python: list[int]) -> None:
        everything = php + python
        self.total = len(everything)
        self.duplicates = self.total - len(set(everything))
        ms = Counter(PHP_REDIS.decompose(i).timestamp_ms for i in everything)
        php_ms = {PHP_REDIS.decompose(i).timestamp_ms for i in php}
        python_ms = {PHP_REDIS.decompose(i).timestamp_ms for i in python}
        self.shared_ms = len(php_ms & python_ms)
        # A counter started twice in a millisecond handed out sequence 1 twice.
        firsts = Counter(
            PHP_REDIS.decompose(i).timestamp_ms
            for i in everything
            if PHP_REDIS.decompose(i).sequence == 1
        )
        self.restarted_ms = {m for m, n in firsts.items() if n > 1}
        kept = [
            i for i in everything if PHP_REDIS.decompose(i).timestamp_ms not in self.restarted_ms
        ]
        self.duplicates_elsewhere = len(kept) - len(set(kept))
        self.ms = len(ms)

    def __str__(self) -> str:
        return (
            f"{self.total:,} ids, {self.duplicates} duplicates, {self.shared_ms} ms shared by "
            f"PHP and Python, {len(self.restarted_ms)} of {self.ms} ms with a counter started "
            f"again by PHP ({self.duplicates_elsewhere} duplicates outside them)"
        )


def test_python_joins_a_php_fleet_without_duplicates(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        own = Outcome(*run_fleet(server.url, "uid_fields"))
        server.client().flushall()
        php, python = run_fleet(server.url, "php")
        joined = Outcome(php, python)
        server.client().flushall()
        fixed = Outcome(*run_fleet(server.url, "php", php="php-fixed"))
    print(f"\nPHP fleet + Python with its own keys: {own}")
    print(f"PHP fleet + Python, mode='php': {joined}")
    print(f"PHP fleet (expiry raised) + Python, mode='php': {fixed}")
    assert own.shared_ms > 100 and own.duplicates > 100  # the collision mode='php' removes
    assert joined.shared_ms > 100  # both sides issued ids in the same milliseconds
    assert joined.duplicates_elsewhere == 0
    assert fixed.shared_ms > 100
    assert fixed.duplicates == 0 and not fixed.restarted_ms
    parts = [PHP_REDIS.decompose(i) for i in python]
    assert {(p.server, p.worker) for p in parts} == {(3, 7)}
    assert min(p.sequence for p in parts) >= 1 and max(p.sequence for p in parts) <= 4095
