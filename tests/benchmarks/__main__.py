"""``python -m tests.benchmarks``: run the benchmarks, print the tables, write the docs page.

    python -m tests.benchmarks                  # everything; writes docs/benchmarks.md + chart
    python -m tests.benchmarks --only gen,memory --no-write
    python -m tests.benchmarks --quick --no-write   # seconds, for the smoke test

Groups whose server is not reachable are skipped and named in the report.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import report
from .harness import Section, machine, versions

ROOT = Path(__file__).resolve().parents[2]
GROUPS = ("gen", "memory", "session", "pg", "mysql", "django", "fanout", "redis")

FULL: dict[str, dict[str, Any]] = {
    "gen": {},
    "public_ids": {},
    "memory": {"count": 1_000_000},
    "session": {"calls": 2000, "rounds": 7},
    "sqla": {"rows": 100_000, "rounds": 3},
    "mysql": {"rows": 100_000, "rounds": 3},
    "index": {"rows": 1_000_000},
    "pg_functions": {"calls": 100_000, "rounds": 3, "pgbench_seconds": 2},
    "sqla_flush": {"rows": 20_000, "rounds": 3},
    "sqla_routing": {"rows": 4000, "gets": 300},
    "django": {"rows": 100_000, "rounds": 3, "sharded_rows": 4000, "gets": 300},
    "sqla_keyed": {"rows": 1000, "rounds": 15},
    "fan_out_page": {"rows": 20_000, "calls": 200, "rounds": 3},
    "redis": {"duration": 0.5, "rounds": 3},
}
QUICK: dict[str, dict[str, Any]] = {
    "gen": {
        "duration": 0.02,
        "rounds": 1,
        "thread_counts": (1, 2),
        "thread_duration": 0.02,
        "thread_rounds": 1,
    },
    "public_ids": {"duration": 0.02, "rounds": 1},
    "memory": {"count": 10_000},
    "session": {"calls": 20, "rounds": 1},
    "sqla": {"rows": 1000, "rounds": 1},
    "mysql": {"rows": 1000, "rounds": 1},
    "index": {"rows": 5000},
    "pg_functions": {"calls": 1000, "rounds": 1, "pgbench_seconds": 1},
    "sqla_flush": {"rows": 200, "rounds": 1},
    "sqla_routing": {"rows": 200, "gets": 5},
    "django": {
        "rows": 500,
        "rounds": 1,
        "sharded_rows": 200,
        "gets": 10,
        "keyed_rows": 50,
        "keyed_rounds": 1,
        "keyed_calls": 1,
    },
    "sqla_keyed": {"rows": 50, "rounds": 1, "calls": 1},
    "fan_out_page": {"rows": 500, "calls": 5, "rounds": 1},
    "redis": {"duration": 0.02, "rounds": 1},
}


def _reachable(group: str) -> str | None:
    """None if the group's server answers, else why not."""
    try:
        if group in ("pg", "django", "fanout"):
            from .databases import _pg_admin

            _pg_admin().close()
        elif group == "mysql":
            from urllib.parse import urlsplit

            import pymysql

            from .databases import MYSQL_URL

            url = urlsplit(MYSQL_URL)
            pymysql.connect(
                host=url.hostname or "127.0.0.1",
                port=url.port or 3306,
                user=url.username or "root",
                password=url.password or "",
                connect_timeout=5,
            ).close()
        elif group == "redis":
            import redis

            from .redis_cost import REDIS_URL

            redis.Redis.from_url(REDIS_URL, socket_timeout=5).ping()
    except Exception as exc:  # any failure to connect means: skip this group
        return f"{group}: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def run(groups: list[str], quick: bool) -> tuple[list[Section], dict[str, Any], list[str]]:
    from . import (
        databases,
        fan_out_page,
        generation,
        keyed_writes,
        memory,
        public_ids,
        redis_cost,
        sessions,
    )

    params = QUICK if quick else FULL
    plan: dict[str, list[tuple[str, Callable[..., tuple[list[Section], dict[str, Any]]]]]] = {
        "gen": [("gen", generation.run), ("public_ids", public_ids.run)],
        "memory": [("memory", memory.run)],
        "session": [("session", sessions.run)],
        "pg": [
            ("sqla", databases.run_sqla),
            ("index", databases.run_index_size),
            ("pg_functions", databases.run_pg_functions),
            ("sqla_flush", databases.run_sqla_flush),
            ("sqla_routing", databases.run_sqla_routing),
            ("sqla_keyed", keyed_writes.run_sqla_keyed_flush),
        ],
        "mysql": [("mysql", databases.run_mysql)],
        "django": [("django", databases.run_django)],
        "fanout": [("fan_out_page", fan_out_page.run)],
        "redis": [("redis", redis_cost.run)],
    }
    sections: list[Section] = []
    data: dict[str, Any] = {}
    skipped: list[str] = []
    for group in groups:
        reason = _reachable(group)
        if reason is not None:
            skipped.append(reason)
            print(f"skipped {reason}", file=sys.stderr)
            continue
        for key, bench in plan[group]:
            started = time.perf_counter()
            new_sections, new_data = bench(**params[key])
            print(f"[{key}: {time.perf_counter() - started:.1f} s]", file=sys.stderr)
            for section in new_sections:
                print(report.text_table(section) + "\n", flush=True)
            sections += new_sections
            data.update(new_data)
    return sections, data, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks")
    parser.add_argument("--only", help=f"comma-separated groups of {','.join(GROUPS)}")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args(argv)
    groups = args.only.split(",") if args.only else list(GROUPS)
    unknown = set(groups) - set(GROUPS)
    if unknown:
        parser.error(f"unknown groups {sorted(unknown)}; choose from {GROUPS}")

    info = machine()
    found = versions()
    print(", ".join(f"{k}: {v}" for k, v in info.items()))
    print(", ".join(f"{k} {v}" for k, v in found.items()) + "\n")
    started = time.perf_counter()
    sections, data, skipped = run(groups, args.quick)
    goals = report.targets(data)
    print(report.text_table(goals))
    for note in goals.notes:
        print(f"- {note}")
    if args.no_write:
        return 0
    image = args.out.parent / "images" / "benchmarks.png"
    drew = report.chart(data, image)
    analysis = (Path(__file__).with_name("analysis.md")).read_text(encoding="utf-8")
    page = report.markdown(
        [goals, *sections],
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=info,
        versions=found,
        chart_path=str(image.relative_to(args.out.parent)) if drew else None,
        skipped=skipped,
        elapsed=time.perf_counter() - started,
        analysis=analysis,
    )
    args.out.write_text(page, encoding="utf-8")
    print(f"\nwrote {args.out}" + (f" and {image}" if drew else " (no matplotlib: no chart)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
