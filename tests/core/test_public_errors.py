"""Every exception and warning a caller can meet is importable from ``uid_fields``.

A user writes ``except uid_fields.FanOutTimeoutError`` or ``warnings.filterwarnings(...,
uid_fields.DeepOffsetWarning)`` without knowing which module of the core, or of which
adapter, raises it. The classes are found in the source with ``ast`` (an adapter's module
needs its ORM to import), so a new exception anywhere in the package fails here until it
is exported, or named below as one that never leaves the package.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import uid_fields

ROOT = Path(uid_fields.__file__).resolve().parent

#: Exceptions that never reach a caller, each with the reason.
INTERNAL = {
    "CliError": "the command line's usage errors: printed, exit status 2",
    "OutputError": "a management command's failed writes to stdout: turned into exit status",
    "TargetWritten": "a move's control flow: caught inside ops.moves, reported as a refusal",
}

_BUILTIN_BASES = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def exception_classes() -> dict[str, str]:
    """Class name -> dotted module of each exception or warning class the package defines."""
    classes: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                    for b in node.bases
                ]
                classes[node.name] = (module, bases)
    found: dict[str, str] = {}
    changed = True
    while changed:  # a class is an exception if one of its bases is
        changed = False
        for name, (module, bases) in classes.items():
            if name not in found and any(b in _BUILTIN_BASES or b in found for b in bases):
                found[name] = module
                changed = True
    return found


def test_every_exception_is_exported_from_the_package() -> None:
    found = exception_classes()
    assert {"FanOutTimeoutError", "UnprotectedShardWriteWarning"} <= set(found)  # the walk works
    missing = sorted(
        f"{name} ({module})"
        for name, module in found.items()
        if name not in INTERNAL and name not in uid_fields.__all__
    )
    assert not missing, f"not importable from uid_fields: {missing}"


def test_each_exported_exception_is_the_class_that_is_raised() -> None:
    """One class under two names, never a copy: ``except uid_fields.X`` catches what the
    module raises. Checked for the core's modules (the adapters' need their ORM)."""
    for name, module in exception_classes().items():
        if name in INTERNAL or module.startswith(("uid_fields.django", "uid_fields.sqlalchemy")):
            continue
        assert getattr(importlib.import_module(module), name) is getattr(uid_fields, name), name
        assert issubclass(getattr(uid_fields, name), BaseException)


def test_the_internal_exceptions_still_exist() -> None:
    """The list above names no class that is gone (it would hide nothing, silently)."""
    assert set(INTERNAL) <= set(exception_classes())
