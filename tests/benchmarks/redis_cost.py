"""Redis: what an id costs when its sequence lives in Redis.

``RedisSequence`` (when present in ``uid_fields.sequences``) is measured through a
``SnowflakeGenerator(sequence=...)``: ``next_id()`` pays a round trip per time unit at
most, ``next_ids(n)`` reserves its block in one. A plain ``INCR`` and ``INCRBY`` round
trip are the reference either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from uid_fields import TWITTER, SnowflakeGenerator

from .harness import Section, alternate, median, rate

__all__ = ["run"]

REDIS_URL = os.environ.get("UID_FIELDS_REDIS_URL", "redis://127.0.0.1:6379/0")
KEY = "uidf_bench:counter"
BLOCK = 1000


def _sequence_generator(url: str) -> tuple[Any, str] | None:
    try:
        from uid_fields.ids.sequences import RedisSequence  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    sequence = RedisSequence(url)
    layout = TWITTER.replace(epoch_ms=1704067200000)
    return SnowflakeGenerator(layout, sequence=sequence, datacenter=1, worker=1), "RedisSequence"


def run(duration: float = 0.5, rounds: int = 3) -> tuple[list[Section], dict[str, Any]]:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.ping()
    client.delete(KEY)
    try:

        def per_call(action: Callable[[], object], ids: int) -> Callable[[], float]:
            def batch() -> int:
                action()
                return ids

            return lambda: rate(batch, duration)

        candidates: list[tuple[str, Callable[[], float]]] = [
            ("INCR round trip (1 id)", per_call(lambda: client.incr(KEY), 1)),
            (
                f"INCRBY {BLOCK} round trip ({BLOCK} ids)",
                per_call(lambda: client.incrby(KEY, BLOCK), BLOCK),
            ),
        ]
        notes = []
        made = _sequence_generator(REDIS_URL)
        if made is not None:
            generator, label = made
            candidates += [
                (f"{label}: next_id()", per_call(generator.next_id, 1)),
                (f"{label}: next_ids({BLOCK})", per_call(lambda: generator.next_ids(BLOCK), BLOCK)),
            ]
        else:
            notes.append(
                "RedisSequence was not in this build yet: the INCR and INCRBY round trips are "
                "the floor its next_id() and next_ids() pay; its own rows come with it."
            )
        samples = alternate(candidates, rounds)
    finally:
        client.delete(KEY)
        client.close()
    rates = {name: median(values) for name, values in samples.items()}
    rows = [[name, f"{1e6 / value:.2f}", f"{value / 1e3:.0f}"] for name, value in rates.items()]
    notes.append("Redis on loopback; one client, one connection.")
    section = Section(
        "redis", "Redis sequence cost per id", ["operation", "µs per id", "k ids/s"], rows, notes
    )
    return [section], {"redis": rates}
