"""Timing helpers shared by the benchmarks: alternating rounds, medians, machine facts.

Every comparison runs its candidates in the same process, one after the other within
each round (the order rotates from round to round), and reports the median of the
rounds, so a noisy neighbour or a CPU frequency change hits every candidate alike.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, TypeVar

__all__ = [
    "Result",
    "Section",
    "alternate",
    "machine",
    "median",
    "rate",
    "timed",
    "versions",
]


@dataclass
class Result:
    """One measured row: a value with its unit and anything else worth printing."""

    name: str
    value: float
    unit: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    """A table of the report."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def rate(batch: Callable[[], int], duration: float) -> float:
    """Ids per second: ``batch()`` (which returns how many ids it made) for ``duration`` s."""
    clock = time.perf_counter
    made = 0
    start = clock()
    end = start + duration
    while True:
        made += batch()
        now = clock()
        if now >= end:
            return made / (now - start)


def timed(action: Callable[[], object]) -> float:
    """Seconds taken by one call."""
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


_S = TypeVar("_S")


def alternate(
    candidates: Sequence[tuple[str, Callable[[], _S]]], rounds: int
) -> dict[str, list[_S]]:
    """Run every candidate once per round, rotating the order; all samples by name."""
    samples: dict[str, list[_S]] = {name: [] for name, _ in candidates}
    for index in range(rounds):
        shift = index % len(candidates) if candidates else 0
        for name, measure in [*candidates[shift:], *candidates[:shift]]:
            samples[name].append(measure())
    return samples


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str]:
    """What the numbers were measured on."""
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {sys.version.split()[0]}",
    }


PACKAGES = (
    "uid-fields",
    "snowflake-id",
    "snowflake-id-toolkit",
    "uuid-utils",
    "python-ulid",
    "Django",
    "SQLAlchemy",
    "psycopg",
    "PyMySQL",
    "redis",
    "matplotlib",
)


def versions(packages: Sequence[str] = PACKAGES) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found
