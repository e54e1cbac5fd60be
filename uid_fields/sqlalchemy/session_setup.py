"""What a sharded session derives from its engines alone, made once per set of engines.

A session per request (``with sharded_session(engines) as session:``) would otherwise
build a router (and resolve every table's route again on its first statements), look up
the write guard of each engine and, for two-phase commit, check every engine's dialect:
none of it depends on the session. ``shard_setup()`` keeps one ``ShardSetup`` per
(shard names, engines, shard map, default shard). It holds the engines by weak
reference, so an entry goes when one of its engines is garbage collected, and keeps at
most ``KEPT`` entries (the oldest goes first): engines made per test or per tenant are
neither kept alive nor piled up.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Engine

from ..placement.shards import ShardMap
from .guard import checked_writes, guard_changes
from .routing import Router
from .twophase import check_postgresql

__all__ = ["KEPT", "ShardSetup", "shard_setup"]

#: Sets of engines whose setup is kept (a process has a handful; the bound only guards
#: against engines made anew for each use).
KEPT = 64


class ShardSetup:
    """The router of one set of engines, and what was checked of them already."""

    __slots__ = ("_guarded_at", "_two_phase_checked", "engine_refs", "router")

    def __init__(self, router: Router) -> None:
        self.router = router
        #: Weak references to the engines, whose callbacks drop the kept entry.
        self.engine_refs: tuple[weakref.ref[Any], ...] = ()
        self._two_phase_checked = False
        self._guarded_at = -1  # guard_changes() when the guards were last seen in place

    def check_two_phase(self, shards: Mapping[str, Engine]) -> None:
        """``check_postgresql``, once per set of engines (a refusal is not remembered)."""
        if not self._two_phase_checked:
            check_postgresql(shards)
            self._two_phase_checked = True

    def guard(self, shards: Mapping[str, Engine], shard_map: ShardMap | None) -> None:
        """``check_writes``, unless the engines were seen guarded so and no guard changed
        since (another ``check_writes`` may have given one of them another shard)."""
        if self._guarded_at != guard_changes():
            self._guarded_at = checked_writes(shards, shard_map=shard_map)


_setups: dict[tuple[Any, ...], ShardSetup] = {}
_lock = threading.Lock()


def shard_setup(
    shards: Mapping[str, Engine], shard_map: ShardMap | None, default_shard: str | None
) -> ShardSetup:
    """The setup shared by sessions over these shards, made (and kept) the first time."""
    try:
        # The names, and the engines and map by identity (the key holds none of them).
        key = (tuple(shards), tuple(map(id, shards.values())), id(shard_map), default_shard)
        found = _setups.get(key)
    except TypeError:  # an unhashable default shard: the router refuses it below
        key, found = None, None
    if found is not None:
        found.router.forget_unsettled()
        return found
    setup = ShardSetup(Router(list(shards), shard_map, default_shard))
    if key is not None:
        _keep(key, setup, shards)
    return setup


def _keep(key: tuple[Any, ...], setup: ShardSetup, shards: Mapping[str, Engine]) -> None:
    def forget(_: Any) -> None:  # an engine was collected: its id may be reused
        with _lock:
            if _setups.get(key) is setup:
                del _setups[key]

    try:
        setup.engine_refs = tuple(weakref.ref(engine, forget) for engine in shards.values())
    except TypeError:  # a bind that takes no weak reference: not kept
        return
    with _lock:
        if key in _setups:
            return  # another thread made one first: either serves
        while len(_setups) >= KEPT:
            del _setups[next(iter(_setups))]
        _setups[key] = setup
