"""Each in-process benchmark at toy sizes, so ``make bench`` never rots.

Nothing here asserts a speed: the targets live in the benchmark report only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks import generation, memory, public_ids, report, sessions
from tests.benchmarks.harness import alternate, machine, rate, versions

pytestmark = pytest.mark.bench


def test_alternate_rotates_and_keeps_every_sample() -> None:
    order: list[str] = []

    def probe(name: str) -> float:
        order.append(name)
        return 1.0

    samples = alternate([("a", lambda: probe("a")), ("b", lambda: probe("b"))], 3)
    assert samples == {"a": [1.0] * 3, "b": [1.0] * 3}
    assert order == ["a", "b", "b", "a", "a", "b"]


def test_rate_counts_what_the_batch_made() -> None:
    assert rate(lambda: 10, 0.001) > 0


def test_generation_benchmark_runs_every_candidate() -> None:
    sections, data = generation.run(
        duration=0.005, rounds=1, thread_counts=(1, 2), thread_duration=0.005, thread_rounds=1
    )
    names = {c.name for c in generation.candidates()}
    assert set(data["single"]) == names
    assert {row[0] for row in sections[0].rows} == names
    # Thread-safe generators never repeat an id when threads share them.
    for candidate in generation.candidates():
        if candidate.kind == "uid_fields":
            assert data["duplicates"][candidate.name] == 0, candidate.name


def test_session_benchmark_reports_wall_and_cpu_of_each_candidate() -> None:
    sections, data = sessions.run(calls=3, rounds=1)
    keys = {key for key, _ in sessions.CANDIDATES}
    assert all(set(figures) == keys for figures in data["session"].values())
    assert set(data["session"]) == {"build wall", "build CPU", "wall", "CPU"}
    assert len(sections[0].rows) == len(keys)
    goals = [row for row in report.targets(data).rows if "sharded_session()" in row[0]]
    assert len(goals) == 2 and all(row[2] in ("met", "NOT MET") for row in goals)


def test_memory_measure_reports_every_cost() -> None:
    result = memory.measure("uid_fields snowflake (twitter)", 2000)
    assert result["id_type"] == "int"
    assert result["generator_bytes"] > 0
    assert set(result) == {"import_bytes", "generator_bytes", "held_bytes_per_id", "id_type"}


def test_report_from_generation_data(tmp_path: Path) -> None:
    _, data = generation.run(
        duration=0.005, rounds=1, thread_counts=(1,), thread_duration=0.005, thread_rounds=1
    )
    data["index_size"] = dict.fromkeys(
        ("snowflake", "identity", "uuid4", "locality_variable", "locality_sequential"), 1
    )
    goals = report.targets(data)
    assert any("layout limit" in row[0] for row in goals.rows)
    assert all(row[2] in ("met", "NOT MET") for row in goals.rows)
    text = report.text_table(goals)
    assert "Targets" in text
    page = report.markdown(
        [goals],
        date="2025-01-01 00:00 UTC",
        machine=machine(),
        versions=versions(),
        chart_path=None,
        skipped=["redis: not here"],
        elapsed=1.0,
        analysis="## Notes",
    )
    assert "| target | measured | status |" in page
    assert "2025-01-01" in page
    pytest.importorskip("matplotlib")
    assert report.chart(data, tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")


def test_public_id_benchmark_reports_each_operation_and_the_target() -> None:
    sections, data = public_ids.run(duration=0.005, rounds=1)
    timings = data["public_ids"]
    assert set(timings) == {"encode id", "decode id", "encode UUID", "decode UUID", "page of 100"}
    assert all(value > 0 for value in timings.values())
    assert {row[0] for row in sections[0].rows} == set(timings)
    goals = report.targets(data)
    (row,) = [row for row in goals.rows if "Public-id" in row[0]]
    assert row[2] in ("met", "NOT MET") and "us" in row[1]


def test_the_fan_out_page_targets_print_their_ratios() -> None:
    times = {
        "one database": 0.001,
        "fan-out": 0.0025,
        "one database, 1 ms wait": 0.002,
        "fan-out, 1 ms wait": 0.005,
    }
    goals = report.targets({"fan_out_page": {"django": times, "sqlalchemy": times}})
    rows = [row for row in goals.rows if "order_by('-id')[:20]" in row[0]]
    assert [row[1].split()[0] for row in rows] == ["2.50x", "2.50x"] * 2
    assert [row[2] for row in rows] == ["met", "NOT MET"] * 2
