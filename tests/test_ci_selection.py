"""How CI picks its tests: by the markers pyproject registers, never by lists of files or
name patterns, and no test depends on how fast a loaded machine runs it."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.sdist

ROOT = Path(__file__).resolve().parents[1]
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns"}


def _makefile_pytest_lines() -> list[str]:
    """The Makefile's pytest commands, continuation lines joined."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return [line for line in text.splitlines() if "-m pytest" in line]


def test_targets_select_by_marker_not_by_file_lists_or_names() -> None:
    lines = _makefile_pytest_lines()
    assert lines
    for line in lines:
        assert "--ignore" not in line and "--deselect" not in line, line
        assert not re.search(r"\s-k\s", line), line


def test_every_marker_a_target_selects_is_registered() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    registered = {
        m.split(":")[0].split("(")[0].strip()
        for m in config["tool"]["pytest"]["ini_options"]["markers"]
    }
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    # `-m EXPR` of pytest, not `python -m MODULE`
    expressions = re.findall(r"(?<!python )(?<!\) )-m ('[^']+'|[a-z_]+)", text)
    used = {
        word
        for expression in expressions
        for word in re.findall(r"[a-z_]+", expression)
        if word not in {"and", "or", "not"}
    }
    assert {"postgres", "mariadb", "stress", "versions", "sdist"} <= used
    assert used <= registered, used - registered


def _is_clock_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCKS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def _elapsed(node: ast.AST, names: set[str]) -> bool:
    """``time.monotonic() - started`` or a name bound to one."""
    if isinstance(node, ast.Name):
        return node.id in names
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Sub)
        and (_is_clock_call(node.left) or _is_clock_call(node.right))
    )


def wall_clock_assertions(source: str) -> list[int]:
    """Lines asserting on an elapsed wall-clock time. A polling loop's guard
    (``assert time.monotonic() < deadline``) is not one: it fails only when what it
    waits for never comes."""
    tree = ast.parse(source)
    names = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _elapsed(node.value, set())
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in ast.walk(node.test):
            if isinstance(compare, ast.Compare) and any(
                _elapsed(side, names) for side in [compare.left, *compare.comparators]
            ):
                found.append(node.lineno)
    return found


def test_the_rule_sees_an_elapsed_bound_and_lets_a_polling_guard_be() -> None:
    source = (
        "import time\n"
        "started = time.monotonic()\n"
        "assert time.monotonic() - started < 5\n"
        "took = time.perf_counter() - started\n"
        "assert took < 0.5\n"
        "deadline = time.monotonic() + 5\n"
        "assert time.monotonic() < deadline, 'never came'\n"
    )
    assert wall_clock_assertions(source) == [3, 5]


def test_no_test_asserts_a_wall_clock_bound() -> None:
    found = {
        f"{path.relative_to(ROOT)}:{line}"
        for path in (ROOT / "tests").rglob("*.py")
        if "benchmarks" not in path.parts
        for line in wall_clock_assertions(path.read_text())
    }
    assert not found, sorted(found)
