"""Id generation: every scheme of uid_fields against the packages users pick instead.

Rates are ids per second over a fixed time, so a generator that reaches its layout's
limit (4096 ids per ms per Twitter worker) shows as that limit, not as a faster call: it
waits for the next millisecond, as it must. The uncapped 22-bit-sequence snowflake row
shows what the same code costs per id when the layout is not the bound.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uid_fields import (
    DECIMAL,
    INSTAGRAM,
    TWITTER,
    DecimalGenerator,
    LocalityUUIDGenerator,
    ShardedIdGenerator,
    SnowflakeGenerator,
    SnowflakeLayout,
    UniqIdGenerator,
)

from .harness import Section, alternate, median, rate

__all__ = ["Candidate", "candidates", "run"]

EPOCH_2024 = 1704067200000
BATCH = 1000
TWITTER_LIMIT = 4096 * 1000  # ids/s per worker: 12 sequence bits per ms
INSTAGRAM_LIMIT = 1024 * 1000  # ids/s per logical shard: 10 sequence bits per ms


@dataclass
class Candidate:
    name: str
    kind: str  # "uid_fields" or "peer"
    make: Callable[[], Callable[[], object]]  # a fresh single-id callable
    thread_safe: bool
    limit: float | None = None  # ids/s the layout allows, if it caps the rate
    batch: Callable[[], Callable[[int], list[Any]]] | None = None  # next_ids, if any
    returns_none: bool = False  # snowflake-id returns None where it has no id to give


def _optional(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        return None


def candidates() -> list[Candidate]:
    """Everything measured; peers that are not installed are left out."""
    uncapped = SnowflakeLayout(epoch_ms=EPOCH_2024, sequence_bits=22, name="seq22")
    twitter = SnowflakeGenerator(TWITTER, datacenter=1, worker=1)
    instagram = ShardedIdGenerator(INSTAGRAM)
    decimal = DecimalGenerator(DECIMAL, server=1)
    variable = LocalityUUIDGenerator()
    sequential = LocalityUUIDGenerator(sequential=True)
    out = [
        Candidate(
            "uid_fields snowflake (twitter)",
            "uid_fields",
            lambda: twitter.next_id,
            True,
            TWITTER_LIMIT,
            lambda: twitter.next_ids,
        ),
        Candidate(
            "uid_fields snowflake (22-bit sequence, uncapped)",
            "uid_fields",
            lambda: SnowflakeGenerator(uncapped).next_id,
            True,
        ),
        Candidate(
            "uid_fields sharded (instagram, one shard)",
            "uid_fields",
            lambda: lambda: instagram.next_id(5),
            True,
            INSTAGRAM_LIMIT,
            lambda: lambda n: instagram.next_ids(n, 5),
        ),
        Candidate(
            "uid_fields decimal",
            "uid_fields",
            lambda: decimal.next_id,
            True,
            None,
            lambda: decimal.next_ids,
        ),
        Candidate(
            "uid_fields locality (variable)",
            "uid_fields",
            lambda: variable.next_id,
            True,
            None,
            lambda: variable.next_ids,
        ),
        Candidate(
            "uid_fields locality (sequential)",
            "uid_fields",
            lambda: sequential.next_id,
            True,
            None,
            lambda: sequential.next_ids,
        ),
        Candidate("uid_fields uniqid", "uid_fields", lambda: UniqIdGenerator(4).next_id, True),
    ]
    snowflake = _optional("snowflake")
    if snowflake is not None and hasattr(snowflake, "SnowflakeGenerator"):
        peer = snowflake.SnowflakeGenerator(1, epoch=TWITTER.epoch_ms)
        out.append(
            Candidate(
                "snowflake-id",
                "peer",
                lambda: peer.__next__,
                False,
                TWITTER_LIMIT,
                returns_none=True,
            )
        )
    toolkit = _optional("snowflake_id_toolkit")
    if toolkit is not None:
        tk = toolkit.TwitterSnowflakeIDGenerator(1, epoch=TWITTER.epoch_ms)
        out.append(
            Candidate(
                "snowflake-id-toolkit", "peer", lambda: tk.generate_next_id, True, TWITTER_LIMIT
            )
        )
    uuid_utils = _optional("uuid_utils")
    if uuid_utils is not None:
        out.append(Candidate("uuid-utils uuid7", "peer", lambda: uuid_utils.uuid7, True))
        compat = _optional("uuid_utils.compat")
        out.append(Candidate("uuid-utils compat.uuid7", "peer", lambda: compat.uuid7, True))
    ulid = _optional("ulid")
    if ulid is not None and hasattr(ulid, "ULID"):
        out.append(Candidate("python-ulid ULID()", "peer", lambda: ulid.ULID, True))
    out.append(Candidate("stdlib uuid.uuid4", "peer", lambda: uuid.uuid4, True))
    out.append(Candidate("stdlib uuid.uuid1", "peer", lambda: uuid.uuid1, True))
    return out


def _single_batch(call: Callable[[], object], returns_none: bool) -> Callable[[], int]:
    span = range(BATCH)

    def batch() -> int:
        made = [call() for _ in span]
        return BATCH - made.count(None)  # only ints: int == None costs nothing

    def batch_always() -> int:
        _ = [call() for _ in span]
        return BATCH

    return batch if returns_none else batch_always


def _ids_batch(next_ids: Callable[[int], list[Any]]) -> Callable[[], int]:
    return lambda: len(next_ids(BATCH))


def _threaded(call: Callable[[], object], threads: int, duration: float) -> tuple[float, int]:
    """Aggregate ids/s of ``threads`` threads sharing one generator, and duplicates seen."""
    span = range(BATCH)
    barrier = threading.Barrier(threads + 1)
    results: list[list[object]] = [[] for _ in range(threads)]
    deadline = [0.0]

    def work(out: list[object]) -> None:
        barrier.wait()
        end = deadline[0]
        clock = time.perf_counter
        while clock() < end:
            out.extend([call() for _ in span])

    workers = [threading.Thread(target=work, args=(out,)) for out in results]
    for worker in workers:
        worker.start()
    start = time.perf_counter()
    deadline[0] = start + duration
    barrier.wait()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - start
    ids = [value for out in results for value in out if value is not None]
    return len(ids) / elapsed, len(ids) - len(set(ids))


def run(
    *,
    duration: float = 0.4,
    rounds: int = 5,
    thread_counts: tuple[int, ...] = (1, 2, 4, 8),
    thread_duration: float = 0.25,
    thread_rounds: int = 3,
) -> tuple[list[Section], dict[str, Any]]:
    cands = candidates()
    single = alternate(
        [(c.name, _measure(_single_batch(c.make(), c.returns_none), duration)) for c in cands],
        rounds,
    )
    batched = alternate(
        [(c.name, _measure(_ids_batch(c.batch()), duration)) for c in cands if c.batch is not None],
        rounds,
    )
    rows: list[list[Any]] = []
    for c in cands:
        value = median(single[c.name])
        rows.append(
            [
                c.name,
                "yes" if c.thread_safe else "no (no lock)",
                f"{value / 1e6:.2f}",
                f"{1e9 / value:.0f}",
                f"{value / c.limit:.1%}" if c.limit else "",
                f"{median(batched[c.name]) / 1e6:.2f}" if c.name in batched else "",
                f"{median(batched[c.name]) / c.limit:.1%}" if c.name in batched and c.limit else "",
            ]
        )
    single_section = Section(
        "generation",
        "Generation, one thread (median of rounds)",
        [
            "generator",
            "thread-safe",
            "next_id M ids/s",
            "ns per id (1/rate)",
            "of layout limit",
            f"next_ids({BATCH}) M ids/s",
            "next_ids of limit",
        ],
        rows,
    )

    threaded: dict[str, dict[int, float]] = {c.name: {} for c in cands}
    duplicates: dict[str, int] = {c.name: 0 for c in cands}
    for count in thread_counts:
        samples: dict[str, list[float]] = {c.name: [] for c in cands}
        for index in range(thread_rounds):
            order = cands[index % len(cands) :] + cands[: index % len(cands)]
            for c in order:
                value, dupes = _threaded(c.make(), count, thread_duration)
                samples[c.name].append(value)
                duplicates[c.name] += dupes
        for c in cands:
            threaded[c.name][count] = median(samples[c.name])
    thread_rows = [
        [c.name]
        + [f"{threaded[c.name][count] / 1e6:.2f}" for count in thread_counts]
        + [str(duplicates[c.name])]
        for c in cands
    ]
    thread_section = Section(
        "threads",
        "Generation, threads sharing one generator (aggregate M ids/s)",
        ["generator", *[f"{n} thr" for n in thread_counts], "duplicates seen"],
        thread_rows,
        [
            "Aggregate rate of all threads calling next_id() on one shared generator; "
            "CPython's GIL runs one thread at a time, so a thread-safe generator can at "
            "best hold its one-thread rate. Duplicates are counted over every id made in "
            "the runs of that row."
        ],
    )
    data = {
        "single": {c.name: median(single[c.name]) for c in cands},
        "batched": {name: median(v) for name, v in batched.items()},
        "threads": threaded,
        "duplicates": duplicates,
        "limits": {c.name: c.limit for c in cands if c.limit},
        "kinds": {c.name: c.kind for c in cands},
    }
    return [single_section, thread_section], data


def _measure(batch: Callable[[], int], duration: float) -> Callable[[], float]:
    return lambda: rate(batch, duration)
