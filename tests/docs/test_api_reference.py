"""docs/api.md and the exports agree: every name in the ``__all__`` of a public module is
on the page, under its own name or as another name of an object shown there, and the
page shows nothing that is not exported (no internal module's members)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"

#: The modules whose ``__all__`` is the public API.
PUBLIC_MODULES = [
    "uid_fields",
    "uid_fields.errors",
    "uid_fields.django",
    "uid_fields.django.testing",
    "uid_fields.sqlalchemy",
    "uid_fields.sqlalchemy.asyncio",
    "uid_fields.sqlalchemy.flask",
]

#: The sections a reader looks for, by task.
TASKS = [
    "Fields",
    "Routing and fan-out",
    "Transactions and writes",
    "Moves",
    "Public ids",
    "Testing",
    "Flask",
    "asyncio",
]

_DIRECTIVE = re.compile(
    r"^\.\. (?:auto(?:class|function|exception|data|module)|py:(?:function|class|data|exception))"
    r"::\s+([\w.]+)",
    re.M,
)
_ALIASES = re.compile(r"Also importable as (.+?)\.\s*$", re.M)
_NAME = re.compile(r"``([\w.]+)``")
_MEMBERS = re.compile(r"^\s+:members:\s*(.+)$", re.M)


def exported() -> dict[str, Any]:
    """Every public name, as ``module.name``, and its object."""
    names: dict[str, Any] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            names[f"{module_name}.{name}"] = getattr(module, name)
    return names


def resolve(dotted: str) -> Any:
    """The object a dotted name names, as ``from parent import name`` finds it: the
    attribute first (``uid_fields.sqlalchemy.audit`` is the function, not the module of
    that name), else the module."""
    parent, _, attribute = dotted.rpartition(".")
    if parent:
        try:
            return getattr(resolve(parent), attribute)
        except AttributeError:
            pass
    return importlib.import_module(dotted)


def documented(text: str) -> dict[str, list[str] | None]:
    """Each name the page documents, and the other names it gives it; None for the
    members of a module shown with ``automodule`` (public as that module's names)."""
    found: dict[str, list[str] | None] = {}
    matches = list(_DIRECTIVE.finditer(text))
    for here, after in zip(matches, [*matches[1:], None], strict=True):
        body = text[here.end() : after.start() if after else len(text)]
        aliases = [n for line in _ALIASES.findall(body) for n in _NAME.findall(line)]
        found[here.group(1)] = aliases
        if here.group(0).startswith(".. automodule::"):
            for members in _MEMBERS.findall(body.split("\n.. ", 1)[0]):
                for member in members.split(","):
                    found[f"{here.group(1)}.{member.strip()}"] = None
    return found


def problems(text: str) -> list[str]:
    """What is wrong between the page ``text`` and the exports (empty when they agree)."""
    public = exported()
    pages = documented(text)
    wrong: list[str] = []
    covered: set[str] = set()
    for target, aliases in pages.items():
        try:
            obj = resolve(target)
        except (ImportError, AttributeError):
            wrong.append(f"{target}: on the page, but not importable")
            continue
        covered.add(target)
        if aliases is None:
            continue  # a member of a module on the page
        known = target in public or target in PUBLIC_MODULES
        if not known and not any(v is obj for v in public.values()):
            wrong.append(f"{target}: on the page, but not exported")
        for alias in aliases:
            if public.get(alias) is not obj:
                wrong.append(f"{alias}: named as {target}, but it is another object")
            covered.add(alias)
    wrong += [f"{name}: exported, but not on the page" for name in public if name not in covered]
    return wrong


def test_every_exported_name_is_on_the_page_and_nothing_else() -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("flask_sqlalchemy")
    assert problems(PAGE.read_text(encoding="utf-8")) == []


def test_a_missing_or_stray_name_is_reported() -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("flask_sqlalchemy")
    text = PAGE.read_text(encoding="utf-8")
    without = text.replace(".. autoclass:: uid_fields.PublicIds\n", "")
    assert problems(without) == ["uid_fields.PublicIds: exported, but not on the page"]
    stray = text + "\n```{eval-rst}\n.. automodule:: uid_fields.ops.move_walk\n```\n"
    assert problems(stray) == ["uid_fields.ops.move_walk: on the page, but not exported"]


def test_the_page_is_grouped_by_task() -> None:
    headings = re.findall(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), re.M)
    assert [h for h in headings if h in TASKS] == TASKS
