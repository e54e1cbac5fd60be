"""The one at-fork hook of the package: state that a forked child must not share.

A child of ``fork()`` (gunicorn, uWSGI, Celery prefork) inherits every generator's
sequence, lock and node identity. Modules register their objects here instead of each
installing its own ``os.register_at_fork`` hook, so one place decides what runs in the
child and in which order: module-level resets first, then every live object.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Protocol

__all__ = ["ForkAware", "on_fork", "register"]


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


_objects: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_resets: list[Callable[[], None]] = []


def register(obj: ForkAware) -> None:
    """Call ``obj._after_fork_in_child()`` in every forked child while ``obj`` lives."""
    _objects.add(obj)


def on_fork(reset: Callable[[], None]) -> Callable[[], None]:
    """Run ``reset`` (module-level state) in every forked child, before the objects."""
    _resets.append(reset)
    return reset


def _after_fork_in_child() -> None:
    for reset in _resets:
        reset()
    for obj in list(_objects):
        obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
