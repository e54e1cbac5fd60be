"""Public ids: the cost of one token made or read, and of a page of 100 tokens.

The design's target is under 10 us per encode or decode in CPython (so a DRF page of
100 rows adds under 1 ms). Each operation runs in batches for ``duration`` seconds per
round, the operations alternate within each round, and the median round is reported.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from uid_fields import TWITTER, LocalityUUIDGenerator, PublicIds, SnowflakeGenerator

from .harness import Section, alternate, median, rate

BATCH = 100


def _per_call(work: Callable[[], object], calls: int, duration: float) -> Callable[[], float]:
    """Seconds per call of ``work`` (which makes ``calls`` calls), measured over ``duration``."""

    def batch() -> int:
        work()
        return calls

    return lambda: 1 / rate(batch, duration)


def run(*, duration: float = 0.3, rounds: int = 5) -> tuple[list[Section], dict[str, Any]]:
    # Two key versions, as after a rotation: the newest encodes, both decode.
    codec = PublicIds(
        "ord", {1: "benchmark key, version 1 .......", 2: "benchmark key v2 .............."}
    )
    ids = SnowflakeGenerator(TWITTER, datacenter=1, worker=2).next_ids(BATCH)
    uuids: list[uuid.UUID] = LocalityUUIDGenerator(pid=4321, mac="02:00:00:00:00:05").next_ids(
        BATCH
    )
    id_tokens = [codec.encode(value) for value in ids]
    uuid_tokens = [codec.encode(value) for value in uuids]
    encode, decode = codec.encode, codec.decode
    page = [Order(value) for value in ids]  # rows of a DRF list page, one token each

    operations: dict[str, Callable[[], float]] = {
        "encode id": _per_call(lambda: [encode(v) for v in ids], BATCH, duration),
        "decode id": _per_call(lambda: [decode(t) for t in id_tokens], BATCH, duration),
        "encode UUID": _per_call(lambda: [encode(v) for v in uuids], BATCH, duration),
        "decode UUID": _per_call(lambda: [decode(t) for t in uuid_tokens], BATCH, duration),
        "page of 100": _per_call(lambda: [{"id": encode(o.id)} for o in page], 1, duration),
    }
    samples = alternate(list(operations.items()), rounds)
    seconds = {name: median(values) for name, values in samples.items()}
    rows = [
        [name, f"{value * 1e6:.2f}", f"{1 / value / 1e3:.0f}"]
        for name, value in seconds.items()
        if name != "page of 100"
    ]
    rows.append(["page of 100", f"{seconds['page of 100'] * 1e6:.0f}", ""])
    section = Section(
        "public_ids",
        "Public ids (10-round Feistel over keyed BLAKE2s), one thread (median of rounds)",
        ["operation", "us per call", "k calls/s"],
        rows,
        [
            "Ids are Twitter snowflakes, UUIDs locality UUIDs; a codec with two key "
            "versions (the newest encodes). 'page of 100' makes the token of each row of a "
            "100-row list, as a DRF list with Meta.public_ids does."
        ],
    )
    return [section], {"public_ids": seconds}


class Order:
    """A row as a serializer sees it: an object with an ``id``."""

    __slots__ = ("id",)

    def __init__(self, id: int) -> None:
        self.id = id
