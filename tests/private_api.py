"""Where an adapter reaches a framework's private names, read from the source with ``ast``.

A private name is one with a single leading underscore. It is the framework's when the
framework's own source defines it (``def _name``, ``self._name = ...``, a class-level
``_name = ...`` or a ``{"_name": ...}`` of a class built with ``type()``), read once from
the installed package's files without importing them.
An adapter reaches it by an attribute (``qs._db``) or by a literal name handed to
``getattr``/``setattr``/``hasattr``. Two forms are not counted: overriding a hook
(``def _fetch_all`` in a subclass) and calling the overridden base (``super()._fetch_all()``):
a subclass cannot do either through a function, so compat lists those hooks instead.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "uid_fields"

_PRIVATE = re.compile(r"^_[A-Za-z]\w*$")
_DEFINED = re.compile(
    r"def\s+(_[A-Za-z]\w*)"
    r"|self\.(_[A-Za-z]\w*)\s*(?::[^=\n]*)?=(?!=)"
    r"|^[ \t]+(_[A-Za-z]\w*)\s*(?::[^=\n]*)?=(?!=)"
    r"|[\"'](_[A-Za-z]\w*)[\"']\s*:",
    re.MULTILINE,
)
_NAME_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


@dataclass(frozen=True)
class Reach:
    """One private name reached in an adapter's source."""

    path: str  # relative to uid_fields/
    line: int
    name: str
    on: str  # the expression whose attribute it is

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.on}.{self.name}"


def names_defined(root: Path) -> set[str]:
    """The private names the Python files under ``root`` define."""
    found: set[str] = set()
    for path in root.rglob("*.py"):
        for match in _DEFINED.finditer(path.read_text(errors="replace")):
            found.add(next(group for group in match.groups() if group))
    return found


@cache
def framework_private_names(package: str) -> frozenset[str]:
    """The private names the installed ``package`` (``django``, ``sqlalchemy``) defines."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, f"{package} is not installed"
    return frozenset(names_defined(Path(spec.origin).parent))


def is_private(name: str) -> bool:
    return bool(_PRIVATE.match(name)) and not name.startswith("__")


def reaches(path: Path) -> list[Reach]:
    """The private names ``path`` reaches on any object, but overrides and ``super()``."""
    tree = ast.parse(path.read_text())
    where = str(path.relative_to(PACKAGE))
    found: list[Reach] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            base = node.value
            is_super = (
                isinstance(base, ast.Call)
                and isinstance(base.func, ast.Name)
                and base.func.id == "super"
            )
            if not is_super:
                found.append(Reach(where, node.lineno, node.attr, ast.unparse(base)))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _NAME_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and is_private(node.args[1].value)
        ):
            on = f"{node.func.id}({ast.unparse(node.args[0])})"
            found.append(Reach(where, node.lineno, node.args[1].value, on))
    return found


def adapter_reaches(adapter: str) -> list[Reach]:
    """What the modules of ``uid_fields/<adapter>/`` reach, but its ``compat.py``."""
    root = PACKAGE / adapter
    return [
        reach
        for path in sorted(root.rglob("*.py"))
        if path != root / "compat.py"
        for reach in reaches(path)
    ]


def compat_reaches(adapter: str) -> list[Reach]:
    """The private names the adapter's ``compat.py`` reaches on objects not its own."""
    return [
        reach
        for reach in reaches(PACKAGE / adapter / "compat.py")
        if reach.on not in ("self", "cls")
    ]


def offenders(adapter: str, framework: str, allowed: set[str], own: set[str]) -> list[str]:
    """Each place outside compat where ``adapter`` reaches a private name of
    ``framework`` that is neither ``allowed`` (documented underscore API) nor one of the
    adapter's ``own`` names that happens to be spelled as one of the framework's."""
    private = framework_private_names(framework)
    return [
        str(reach)
        for reach in adapter_reaches(adapter)
        if reach.name in private and reach.name not in allowed and reach.name not in own
    ]


def overridden(adapter: str, framework: str, own: set[str]) -> set[str]:
    """The framework's private methods the adapter's classes override (``def _name``)."""
    private = framework_private_names(framework)
    root = PACKAGE / adapter
    found: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        if path == root / "compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and is_private(item.name)
                        and item.name in private
                    ):
                        found.add(item.name)
    return found - own


def own_reaches_not_on_self(adapter: str, own: set[str]) -> list[str]:
    """Where the adapter reaches one of its ``own`` names on anything but ``self``."""
    return [
        str(reach) for reach in adapter_reaches(adapter) if reach.name in own and reach.on != "self"
    ]


def query_reaches(adapter: str, names: set[str]) -> list[str]:
    """Where the adapter, outside compat, reaches one of ``names`` on a query object:
    ``<anything>.query.<name>``, or ``query.<name>`` on a variable named ``query``."""
    root = PACKAGE / adapter
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in names:
                base = node.value
                on_query = (isinstance(base, ast.Attribute) and base.attr == "query") or (
                    isinstance(base, ast.Name) and base.id == "query"
                )
                if on_query:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    return found
