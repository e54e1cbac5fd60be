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

__all__ = ["ForkAware", "ForkQuiet", "on_fork", "quiet_across_fork", "register"]


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


class ForkQuiet(Protocol):
    """An object whose I/O must not be half done when the process forks."""

    def _before_fork(self) -> None: ...

    def _after_fork(self) -> None:
        """In the parent and in the child: undo ``_before_fork``."""
        ...


_objects: weakref.WeakSet[ForkAware] = weakref.WeakSet()
_quiet: weakref.WeakSet[ForkQuiet] = weakref.WeakSet()
_quieted: list[ForkQuiet] = []
_resets: list[Callable[[], None]] = []


def register(obj: ForkAware) -> None:
    """Call ``obj._after_fork_in_child()`` in every forked child while ``obj`` lives."""
    _objects.add(obj)


def quiet_across_fork(obj: ForkQuiet) -> None:
    """Call ``obj._before_fork()`` before every fork and ``obj._after_fork()`` after it.

    A lease renewing in another thread at the moment of ``fork()`` would leave the
    child a copy of a half-done transaction (SQLite's lock state, a socket mid-reply):
    holding the lease's I/O lock across the fork keeps that from happening.
    """
    _quiet.add(obj)


def _before_fork() -> None:
    _quieted[:] = list(_quiet)
    for obj in _quieted:
        obj._before_fork()


def _after_fork_in_parent() -> None:
    for obj in reversed(_quieted):
        obj._after_fork()
    _quieted.clear()


def on_fork(reset: Callable[[], None]) -> Callable[[], None]:
    """Run ``reset`` (module-level state) in every forked child, before the objects."""
    _resets.append(reset)
    return reset


def _after_fork_in_child() -> None:
    for quiet in reversed(_quieted):
        quiet._after_fork()
    _quieted.clear()
    for reset in _resets:
        reset()
    for obj in list(_objects):
        obj._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
