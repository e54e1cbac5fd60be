"""Old import paths of modules that moved when the core was grouped by idea.

``import uid_fields.shards`` (and every other path below) keeps working for one minor
version: a finder on ``sys.meta_path`` answers the old name with the module at its new
place and warns with ``DeprecationWarning``, so the package tree itself shows only the
new layout and no module is duplicated.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old dotted name -> new dotted name
MOVED: dict[str, str] = {
    "uid_fields.validate": "uid_fields._internal.validate",
    "uid_fields.timeutil": "uid_fields._internal.timeutil",
    "uid_fields.forks": "uid_fields._internal.forks",
    "uid_fields._redis": "uid_fields._internal.redis",
    "uid_fields.hashing": "uid_fields._internal.hashing",
    "uid_fields.layouts": "uid_fields.ids.layouts",
    "uid_fields.generators": "uid_fields.ids.generators",
    "uid_fields.sequences": "uid_fields.ids.sequences",
    "uid_fields.workers": "uid_fields.ids.nodes",
    "uid_fields.leases": "uid_fields.ids.leases",
    "uid_fields.leases.database": "uid_fields.ids.leases.database",
    "uid_fields.leases.redis": "uid_fields.ids.leases.redis",
    "uid_fields.leases.state": "uid_fields.ids.leases.state",
    "uid_fields.shards": "uid_fields.placement.shards",
    "uid_fields.predicates": "uid_fields.placement.predicates",
    "uid_fields.moves": "uid_fields.ops.moves",
    "uid_fields.twophase": "uid_fields.ops.twophase",
    "uid_fields.replicas": "uid_fields.ops.replicas",
    "uid_fields.parallel": "uid_fields.ops.parallel",
    "uid_fields.audit": "uid_fields.ops.audit",
    "uid_fields.sqlalchemy.errors": "uid_fields.errors",
}

#: public module names of the contract (``from uid_fields import locality``) that also
#: import by their old dotted path without a warning
ALIASES: dict[str, str] = {
    "uid_fields.locality": "uid_fields.ids.locality",
    "uid_fields.uniqid": "uid_fields.ids.uniqid",
}


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module already at its new place."""

    def __init__(self, new: str, warn: bool) -> None:
        self.new = new
        self.warn = warn
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if self.warn:
            warnings.warn(
                f"{spec.name} moved to {self.new}; the old path is removed in the next minor "
                "version",
                DeprecationWarning,
                stacklevel=2,
            )
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when its new name was imported: only its own spec is put back."""
        module.__spec__ = self._spec


class MovedModules(importlib.abc.MetaPathFinder):
    """Answers the old dotted names of moved modules."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in MOVED:
            return importlib.machinery.ModuleSpec(fullname, _Alias(MOVED[fullname], True))
        if fullname in ALIASES:
            return importlib.machinery.ModuleSpec(fullname, _Alias(ALIASES[fullname], False))
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once (before the path finder, which would
    otherwise load ``uid_fields.leases.database`` a second time from the aliased package)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
