"""docs/logging.md names every logger the package logs on, and only those.

The loggers are read from the source with ``ast``: each is a module-level
``logging.getLogger("uid_fields.<area>")`` (never one per call or per object).
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import uid_fields

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "logging.md"


def loggers_in_the_source() -> dict[str, list[str]]:
    """Logger name -> the modules that get it, with every getLogger call checked to be
    at module level."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "uid_fields").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_level = {id(node.value) for node in tree.body if isinstance(node, ast.Assign)}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
            ):
                where = str(path.relative_to(ROOT))
                assert id(node) in module_level, f"{where}: getLogger below module level"
                (argument,) = node.args
                assert isinstance(argument, ast.Constant), where
                found.setdefault(str(argument.value), []).append(where)
    return found


def loggers_on_the_page() -> set[str]:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| `")]
    return {re.match(r"\| `([a-z_.]+)`", row).group(1) for row in rows}  # type: ignore[union-attr]


def test_the_page_documents_every_logger_of_the_package() -> None:
    in_source = loggers_in_the_source()
    areas = set(in_source) - {"uid_fields"}  # the package logger only gets a NullHandler
    assert areas == loggers_on_the_page()
    assert all(name.startswith("uid_fields.") for name in areas)
    assert {"uid_fields.leases", "uid_fields.twophase", "uid_fields.next_id"} <= areas


def test_the_package_logger_has_a_null_handler_and_nothing_else() -> None:
    assert uid_fields.__name__ == "uid_fields"  # imported: it set its logger up
    handlers = logging.getLogger("uid_fields").handlers
    assert [type(h) for h in handlers] == [logging.NullHandler]
    for name in loggers_on_the_page():
        assert logging.getLogger(name).handlers == []


def test_the_page_is_in_the_reference_toctree() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    reference = index[index.index(":caption: Reference") :]
    assert "\nlogging\n" in reference[: reference.index("```")]
