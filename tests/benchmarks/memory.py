"""Memory: what importing a package, one generator and a million held ids cost.

Each candidate runs in a fresh interpreter (``python -m tests.benchmarks.memory NAME N``)
so imports and allocator state of one never count for another. Import and held-id
costs are resident set size (RSS) deltas from /proc; the per-generator cost is what
tracemalloc sees allocated for 1,000 generators, divided by 1,000.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from typing import Any

from .harness import Section

__all__ = ["CANDIDATES", "measure", "run"]

EPOCH_2024 = 1704067200000

# name: (import statement, expression making a generator ``g``, expression making one id)
CANDIDATES: dict[str, tuple[str, str, str]] = {
    "uid_fields snowflake (twitter)": (
        "from uid_fields import TWITTER, SnowflakeGenerator",
        "SnowflakeGenerator(TWITTER, datacenter=1, worker=1)",
        "g.next_id()",
    ),
    "uid_fields decimal": (
        "from uid_fields import DECIMAL, DecimalGenerator",
        "DecimalGenerator(DECIMAL, server=1)",
        "g.next_id()",
    ),
    "uid_fields locality (variable)": (
        "from uid_fields import LocalityUUIDGenerator",
        "LocalityUUIDGenerator()",
        "g.next_id()",
    ),
    "uid_fields uniqid": (
        "from uid_fields import UniqIdGenerator",
        "UniqIdGenerator(4)",
        "g.next_id()",
    ),
    "snowflake-id": (
        "from snowflake import SnowflakeGenerator",
        "SnowflakeGenerator(1, epoch=1288834974657)",
        "next(g)",
    ),
    "snowflake-id-toolkit": (
        "from snowflake_id_toolkit import TwitterSnowflakeIDGenerator",
        "TwitterSnowflakeIDGenerator(1, epoch=1288834974657)",
        "g.generate_next_id()",
    ),
    "uuid-utils uuid7": ("import uuid_utils", "None", "uuid_utils.uuid7()"),
    "python-ulid ULID()": ("from ulid import ULID", "None", "ULID()"),
    "stdlib uuid.uuid4": ("import uuid", "None", "uuid.uuid4()"),
}


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as handle:
        pages = int(handle.read().split()[1])
    import resource

    return pages * resource.getpagesize()


def measure(name: str, count: int) -> dict[str, Any]:
    """In this process: import, generator and held-ids costs of one candidate."""
    import gc

    imports, make, one = CANDIDATES[name]
    scope: dict[str, Any] = {}
    gc.collect()
    before = _rss()
    exec(imports, scope)
    imported = _rss() - before
    per_generator: float | None = None
    if make != "None":
        tracemalloc.start()
        snapshot = tracemalloc.take_snapshot()
        kept = [eval(make, scope) for _ in range(1000)]
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        per_generator = sum(s.size_diff for s in after.compare_to(snapshot, "filename")) / len(kept)
        del kept
    scope["g"] = eval(make, scope)
    call = eval(f"lambda: {one}", scope)
    gc.collect()
    before = _rss()
    ids = [call() for _ in range(count)]
    held = _rss() - before
    return {
        "import_bytes": imported,
        "generator_bytes": per_generator,
        "held_bytes_per_id": held / len(ids),
        "id_type": type(ids[0]).__name__,
    }


def run(count: int = 1_000_000) -> tuple[list[Section], dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for name in CANDIDATES:
        process = subprocess.run(
            [sys.executable, "-m", "tests.benchmarks.memory", name, str(count)],
            capture_output=True,
            text=True,
            check=False,
        )
        if process.returncode != 0:
            continue  # not installed
        results[name] = json.loads(process.stdout)
    rows = [
        [
            name,
            r["id_type"],
            f"{r['import_bytes'] / 2**20:.1f}",
            f"{r['generator_bytes']:.0f}" if r["generator_bytes"] is not None else "(a function)",
            f"{r['held_bytes_per_id'] * 1e6 / 2**20:.0f}",
        ]
        for name, r in results.items()
    ]
    section = Section(
        "memory",
        "Memory",
        [
            "generator",
            "id type",
            "import RSS MiB",
            "bytes per generator",
            "RSS MiB per 1M ids held",
        ],
        rows,
        [
            "Import RSS is measured after the interpreter is up (Python itself is not "
            "counted); held ids are a plain list of what one call returns, measured as "
            f"the RSS growth while making {count:,} of them."
        ],
    )
    return [section], {"memory": results}


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], int(sys.argv[2]))))
