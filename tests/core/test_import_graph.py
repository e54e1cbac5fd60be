"""The import graph, read from the source with ``ast`` (nothing here imports the package).

- The core (everything outside ``uid_fields/django/`` and ``uid_fields/sqlalchemy/``)
  imports no ORM or ORM add-on, anywhere: not inside functions, not for type checking.
- No function imports a module of the package, which is how import cycles get hidden.
  Two places may: ``AppConfig.ready`` (Django's place to register checks and signals) and
  a module-level ``__getattr__`` that loads an optional dependency's module on first use.
- The module-level imports of the package form no cycle, counting the imports under
  ``if TYPE_CHECKING:``: a cycle that only a type checker walks still ties the modules
  together (neither can be read, moved or tested without the other).
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.sdist

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "uid_fields"
ADAPTERS = ("uid_fields.django", "uid_fields.sqlalchemy")
ORMS = ("django", "sqlalchemy", "rest_framework", "alembic")


@dataclass
class Import:
    """One import statement (or importlib call with a literal name), resolved."""

    module: str  # the importing module
    line: int
    targets: list[str]  # absolute dotted names it may load, submodules resolved
    text: str
    function: str | None  # innermost enclosing function, None at module level
    allowed_in_function: bool  # AppConfig.ready or module-level __getattr__
    type_checking: bool  # under ``if TYPE_CHECKING:``


@dataclass
class Package:
    modules: dict[str, Path]  # dotted name -> file
    packages: set[str]  # dotted names that are packages (have __init__.py)
    imports: list[Import] = field(default_factory=list)


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_app_config(node: ast.ClassDef) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name == "AppConfig":
            return True
    return False


class _Collector(ast.NodeVisitor):
    def __init__(self, package: Package, module: str, is_package: bool) -> None:
        self.package = package
        self.module = module
        self.base = module if is_package else module.rpartition(".")[0]
        self.scope: list[ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.functions: list[str] = []  # qualified names of the enclosing functions
        self.allowed: list[bool] = []
        self.type_checking = 0

    # -- scopes ---------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node)
        self.generic_visit(node)
        self.scope.pop()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        parent = self.scope[-1] if self.scope else None
        allowed = (parent is None and node.name == "__getattr__") or (
            isinstance(parent, ast.ClassDef)
            and len(self.scope) == 1
            and _is_app_config(parent)
            and node.name == "ready"
        )
        self.scope.append(node)
        self.functions.append(".".join(s.name for s in self.scope))
        self.allowed.append(allowed)
        self.generic_visit(node)
        self.scope.pop()
        self.functions.pop()
        self.allowed.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_checking += 1
            for statement in node.body:
                self.visit(statement)
            self.type_checking -= 1
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)

    # -- imports --------------------------------------------------------------------
    def _record(self, node: ast.stmt | ast.expr, targets: list[str]) -> None:
        self.package.imports.append(
            Import(
                module=self.module,
                line=node.lineno,
                targets=targets,
                text=ast.unparse(node),
                function=self.functions[-1] if self.functions else None,
                allowed_in_function=bool(self.allowed) and self.allowed[-1],
                type_checking=self.type_checking > 0,
            )
        )

    def _resolve(self, level: int, module: str | None) -> str:
        if level == 0:
            return module or ""
        base = self.base.split(".")
        base = base[: len(base) - (level - 1)]
        return ".".join([*base, module] if module else base)

    def visit_Import(self, node: ast.Import) -> None:
        self._record(node, [alias.name for alias in node.names])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = self._resolve(node.level, node.module)
        targets: list[str] = []
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in self.package.modules:
                targets.append(submodule)  # ``from . import x``: the submodule x
            elif source not in targets:
                targets.append(source)  # a name defined in ``source`` (module or __init__)
        self._record(node, targets)

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("...") / __import__("...") with a literal name
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in ("import_module", "__import__") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                text = first.value
                level = len(text) - len(text.lstrip("."))
                self._record(node, [self._resolve(level, text.lstrip(".") or None)])
        self.generic_visit(node)


def read_package(root: Path = ROOT, name: str = PACKAGE) -> Package:
    files = sorted(p for p in (root / name).rglob("*.py") if "__pycache__" not in p.parts)
    modules: dict[str, Path] = {}
    packages: set[str] = set()
    for path in files:
        dotted, is_package = module_name(path, root)
        modules[dotted] = path
        if is_package:
            packages.add(dotted)
    package = Package(modules, packages)
    for dotted, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        _Collector(package, dotted, dotted in packages).visit(tree)
    return package


def _inside(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _where(package: Package, imp: Import, root: Path) -> str:
    path = package.modules[imp.module].relative_to(root)
    scope = f" in {imp.function}()" if imp.function else ""
    return f"{path}:{imp.line}{scope}: {imp.text}"


# -- the three rules ----------------------------------------------------------------------
def orm_imports_in_core(package: Package, root: Path = ROOT) -> list[str]:
    offenders = []
    for imp in package.imports:
        if any(_inside(imp.module, adapter) for adapter in ADAPTERS):
            continue
        bad = [
            t
            for t in imp.targets
            if any(_inside(t, orm) for orm in ORMS)
            or any(_inside(t, adapter) for adapter in ADAPTERS)
        ]
        if bad:
            offenders.append(_where(package, imp, root))
    return offenders


def imports_inside_functions(package: Package, root: Path = ROOT) -> list[str]:
    offenders = []
    for imp in package.imports:
        if imp.function is None or imp.allowed_in_function:
            continue
        if any(_inside(t, PACKAGE) for t in imp.targets):
            offenders.append(_where(package, imp, root))
    return offenders


def module_graph(package: Package) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in package.modules}
    for imp in package.imports:
        if imp.function is not None:
            continue
        for target in imp.targets:
            # the nearest module of the package that the dotted name loads
            while target and target not in package.modules:
                target = target.rpartition(".")[0]
            if target and target != imp.module:
                graph[imp.module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; a package is shallow enough
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_a_cycle(graph, component) for component in sorted(components)]


def _a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, as a path back to it."""
    members = set(component)
    start = component[0]
    paths: dict[str, list[str]] = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for succ in sorted(graph[node] & members):
            if succ == start:
                return [*paths[node], start]
            if succ not in paths:
                paths[succ] = [*paths[node], succ]
                queue.append(succ)
    raise AssertionError(f"no cycle in {component}")  # pragma: no cover


def cycle_report(package: Package, root: Path = ROOT) -> list[str]:
    """Each cycle as ``a -> b -> a``, then the import statement behind every edge."""
    lines = []
    for cycle in cycles(module_graph(package)):
        lines.append(" -> ".join(cycle))
        for source, target in itertools.pairwise(cycle):
            for imp in package.imports:
                if imp.module != source or imp.function is not None:
                    continue
                if any(_inside(t, target) for t in imp.targets):
                    typing = " (under TYPE_CHECKING)" if imp.type_checking else ""
                    where = _where(package, imp, root)
                    lines.append(f"    {source} -> {target}: {where}{typing}")
                    break
    return lines


def _report(title: str, offenders: list[str]) -> str:
    return f"{title} ({len(offenders)}):\n" + "\n".join(f"  {o}" for o in offenders)


# -- tests --------------------------------------------------------------------------------
def test_the_reader_sees_the_package() -> None:
    package = read_package()
    assert {"uid_fields", "uid_fields.ids.generators", "uid_fields.django.apps"} <= set(
        package.modules
    )
    graph = module_graph(package)
    assert "uid_fields.ids.generators" in graph["uid_fields"]
    assert "uid_fields.ids.layouts" in graph["uid_fields.ids.generators"]


def test_the_core_imports_no_orm() -> None:
    package = read_package()
    offenders = orm_imports_in_core(package)
    assert not offenders, _report(
        "core modules importing django/sqlalchemy/rest_framework/alembic or an adapter",
        offenders,
    )


def test_no_function_imports_a_module_of_the_package() -> None:
    package = read_package()
    offenders = imports_inside_functions(package)
    assert not offenders, _report(
        "imports of uid_fields modules inside functions (allowed only in AppConfig.ready "
        "and a module-level __getattr__ for an optional dependency)",
        offenders,
    )


def test_module_level_imports_have_no_cycle() -> None:
    lines = cycle_report(read_package())
    assert not lines, "import cycles among uid_fields modules (TYPE_CHECKING counts):\n" + (
        "\n".join(f"  {line}" for line in lines)
    )


def part_graph(package: Package, adapter: str) -> dict[str, set[str]]:
    """The adapter's modules grouped by part: a folder of the adapter (``query``,
    ``relations``, ...) is one node, a module at its top is a node of its own."""
    prefix = adapter + "."

    def part(name: str) -> str:
        return prefix + name[len(prefix) :].split(".")[0]

    graph: dict[str, set[str]] = {}
    for source, targets in module_graph(package).items():
        if not source.startswith(prefix):
            continue
        node = graph.setdefault(part(source), set())
        node.update(part(t) for t in targets if t.startswith(prefix) and part(t) != part(source))
    return graph


def test_the_django_adapters_parts_have_no_cycle() -> None:
    """``uid_fields/django/`` is grouped into parts (columns, connections, query,
    relations, web, ops, ...) that stand one above another: no part imports one that
    imports it back, TYPE_CHECKING included (docs/architecture.md)."""
    found = cycles(part_graph(read_package(), "uid_fields.django"))
    assert not found, "cycles among the parts of uid_fields/django/:\n" + "\n".join(
        "  " + " -> ".join(cycle) for cycle in found
    )


def test_the_rules_catch_what_they_are_for(tmp_path: Path) -> None:
    """The checks on a small package with one of each offence, and the allowed cases."""
    files = {
        "uid_fields/__init__.py": "from .a import A\n",
        "uid_fields/a.py": (
            "from typing import TYPE_CHECKING\n"
            "from . import b\n"
            "A = 1\n"
            "if TYPE_CHECKING:\n"
            "    import sqlalchemy\n"
            "    from .c import C\n"
            "def f():\n"
            "    from .c import C\n"
            "    import django.db\n"
        ),
        "uid_fields/b.py": "from .a import A\n",
        "uid_fields/c.py": "from uid_fields.d import x\n",
        "uid_fields/d.py": "import importlib as il\nx = il.import_module('uid_fields.c')\n",
        "uid_fields/e.py": "def g():\n    return 1\n",
        "uid_fields/f.py": "from .g import G\nF = 1\n",
        "uid_fields/g.py": (
            "from typing import TYPE_CHECKING\nG = 1\nif TYPE_CHECKING:\n    from .f import F\n"
        ),
        "uid_fields/sqlalchemy/__init__.py": (
            "import sqlalchemy\n"
            "def __getattr__(name):\n"
            "    from . import asyncio\n"
            "    return asyncio\n"
        ),
        "uid_fields/sqlalchemy/asyncio.py": "from sqlalchemy.ext import asyncio\n",
        "uid_fields/django/__init__.py": "",
        "uid_fields/django/apps.py": (
            "from django.apps import AppConfig\n"
            "class Config(AppConfig):\n"
            "    def ready(self):\n"
            "        from . import checks\n"
            "    def other(self):\n"
            "        from . import checks\n"
        ),
        "uid_fields/django/checks.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    package = read_package(tmp_path)
    assert orm_imports_in_core(package, tmp_path) == [
        "uid_fields/a.py:5: import sqlalchemy",
        "uid_fields/a.py:9 in f(): import django.db",
    ]
    assert imports_inside_functions(package, tmp_path) == [
        "uid_fields/a.py:8 in f(): from .c import C",
        "uid_fields/django/apps.py:6 in Config.other(): from . import checks",
    ]
    graph = module_graph(package)
    assert graph["uid_fields"] == {"uid_fields.a"}
    assert graph["uid_fields.a"] == {"uid_fields.b", "uid_fields.c"}  # .c: type checking
    assert cycles(graph) == [
        ["uid_fields.a", "uid_fields.b", "uid_fields.a"],
        ["uid_fields.c", "uid_fields.d", "uid_fields.c"],
        ["uid_fields.f", "uid_fields.g", "uid_fields.f"],
    ]
    assert cycle_report(package, tmp_path) == [
        "uid_fields.a -> uid_fields.b -> uid_fields.a",
        "    uid_fields.a -> uid_fields.b: uid_fields/a.py:2: from . import b",
        "    uid_fields.b -> uid_fields.a: uid_fields/b.py:1: from .a import A",
        "uid_fields.c -> uid_fields.d -> uid_fields.c",
        "    uid_fields.c -> uid_fields.d: uid_fields/c.py:1: from uid_fields.d import x",
        "    uid_fields.d -> uid_fields.c: uid_fields/d.py:2: il.import_module('uid_fields.c')",
        "uid_fields.f -> uid_fields.g -> uid_fields.f",
        "    uid_fields.f -> uid_fields.g: uid_fields/f.py:1: from .g import G",
        "    uid_fields.g -> uid_fields.f: uid_fields/g.py:4: from .f import F"
        " (under TYPE_CHECKING)",
    ]


# -- layers -------------------------------------------------------------------------------
#: Each layer of the package, lowest first. A module may import its own layer folder and
#: any lower layer, never a higher one and never a sibling folder of its own rank: so the
#: core reads ``errors/clock <- _internal <- ids <- placement, sql <- config, ops`` and
#: the adapters stand on all of it, side by side.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("uid_fields.errors", "uid_fields.clock"),
    ("uid_fields._internal",),
    ("uid_fields.ids",),
    ("uid_fields.placement", "uid_fields.sql"),
    ("uid_fields.config", "uid_fields.ops"),
    ("uid_fields.django", "uid_fields.sqlalchemy"),
    ("uid_fields",),  # the public re-exports, the command line and __main__
)
#: Top-level modules besides the layers: the command line, and the public module names
#: of ``ids.locality`` and ``ids.uniqid`` (re-exports that type checkers see).
TOP_LEVEL_MODULES = {
    "uid_fields.cli",
    "uid_fields.__main__",
    "uid_fields.locality",
    "uid_fields.uniqid",
}


def layer_of(module: str) -> tuple[int, str] | None:
    """(rank, folder) of a module: the longest layer prefix that contains it."""
    best: tuple[int, str] | None = None
    for rank, folders in enumerate(LAYERS):
        for folder in folders:
            if (module == folder or module.startswith(folder + ".")) and (
                best is None or len(folder) > len(best[1])
            ):
                best = (rank, folder)
    return best


def layer_violations(package: Package, root: Path = ROOT) -> list[str]:
    """Every module-level import that points up a layer or across to a sibling folder."""
    offenders = []
    for imp in package.imports:
        source = layer_of(imp.module)
        for target in imp.targets:
            if not _inside(target, PACKAGE):
                continue
            while target and target not in package.modules:
                target = target.rpartition(".")[0]
            theirs = layer_of(target)
            if source is None or theirs is None:
                offenders.append(f"{_where(package, imp, root)} (module outside every layer)")
            elif theirs[0] > source[0] or (theirs[0] == source[0] and theirs[1] != source[1]):
                offenders.append(
                    f"{_where(package, imp, root)} ({source[1]} may not import {theirs[1]})"
                )
    return offenders


def test_imports_run_one_way_between_layers() -> None:
    offenders = layer_violations(read_package())
    assert not offenders, _report("imports against the layer order", offenders)


def test_every_core_module_sits_in_a_layer_folder() -> None:
    """``ls uid_fields`` shows the layers: no stray core module at the top level."""
    top = {
        name
        for name in read_package().modules
        if name.count(".") == 1 and name not in ("uid_fields.django", "uid_fields.sqlalchemy")
    }
    allowed = {f for folders in LAYERS for f in folders} | TOP_LEVEL_MODULES
    assert top <= allowed, sorted(top - allowed)


def test_the_layer_rule_catches_back_and_side_arrows(tmp_path: Path) -> None:
    files = {
        "uid_fields/__init__.py": "from .ids.layouts import L\n",
        "uid_fields/errors.py": "",
        "uid_fields/ids/__init__.py": "",
        "uid_fields/ids/layouts.py": "from ..placement.shards import S\nL = 1\n",
        "uid_fields/placement/__init__.py": "",
        "uid_fields/placement/shards.py": (
            "from ..ids.layouts import L\nfrom ..sql import q\nS = 1\n"
        ),
        "uid_fields/sql/__init__.py": "q = 1\n",
        "uid_fields/ops/__init__.py": "from ..config import c\n",
        "uid_fields/config/__init__.py": "from ..errors import E\nc = 1\n",
        "uid_fields/stray.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layer_violations(read_package(tmp_path), tmp_path) == [
        "uid_fields/ids/layouts.py:1: from ..placement.shards import S "
        "(uid_fields.ids may not import uid_fields.placement)",
        "uid_fields/ops/__init__.py:1: from ..config import c "
        "(uid_fields.ops may not import uid_fields.config)",
        "uid_fields/placement/shards.py:2: from ..sql import q "
        "(uid_fields.placement may not import uid_fields.sql)",
    ]
