"""The core's shape: no ORM, one at-fork hook, one set of argument checks."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

import uid_fields
from uid_fields import (
    TWITTER,
    DecimalGenerator,
    LocalityUUIDGenerator,
    SnowflakeGenerator,
    UniqIdGenerator,
)
from uid_fields.ids.layouts import DECIMAL

PACKAGE = Path(uid_fields.__file__).parent
ADAPTERS = ("django", "sqlalchemy")


def core_modules() -> list[Path]:
    return [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in ADAPTERS
    ]


def imported_names(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):  # every import, also those inside functions
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_the_core_never_imports_an_orm() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): name
        for path in core_modules()
        for name in imported_names(ast.parse(path.read_text()))
        if name.split(".")[0] in ADAPTERS
    }
    assert offenders == {}


def test_importing_the_core_loads_no_orm() -> None:
    code = (
        "import sys, uid_fields, uid_fields.ids.nodes, uid_fields.ids.leases, uid_fields.config\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'sqlalchemy'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_one_at_fork_hook_for_the_whole_package() -> None:
    hooks = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "register_at_fork" in path.read_text()
    ]
    assert hooks == ["_internal/forks.py"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1, "10"])
def test_clock_tolerances_must_be_finite_numbers(bad: object) -> None:
    for make in (
        lambda: SnowflakeGenerator(TWITTER, max_backward_ms=bad),  # type: ignore[arg-type]
        lambda: DecimalGenerator(DECIMAL, max_backward_ms=bad),  # type: ignore[arg-type]
        lambda: UniqIdGenerator(4, max_backward_ms=bad),  # type: ignore[arg-type]
    ):
        with pytest.raises((TypeError, ValueError), match="max_backward_ms"):
            make()


@pytest.mark.parametrize(("bad", "error"), [(-1, ValueError), (True, TypeError), (2.0, TypeError)])
def test_every_generator_checks_counts_alike(bad: object, error: type[Exception]) -> None:
    generators = [
        SnowflakeGenerator(TWITTER, worker=1),
        DecimalGenerator(DECIMAL),
        LocalityUUIDGenerator(),
        UniqIdGenerator(4),
    ]
    for generator in generators:
        with pytest.raises(error, match="count"):
            generator.next_ids(bad)  # type: ignore[arg-type]
