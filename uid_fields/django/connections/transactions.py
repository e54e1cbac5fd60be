"""Transactions over several shards: ``sharded_atomic``, and the check that a shard write
inside a transaction has one on its own shard.

``transaction.atomic()`` without ``using=`` opens a transaction on ``default`` only. A
row written to a shard inside it commits on its own: an exception in the block rolls
``default`` back and leaves the shard's row, and ``on_commit()`` (on ``default``) does not
wait for it. ``sharded_atomic()`` is the block that covers the shards; ``check_transaction``
says so when a write is not covered (``UNPROTECTED_SHARD_WRITES``).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Any

import django
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ...errors import UnprotectedShardWriteWarning
from ..conf import conf, shard_databases
from .twophase import two_phase_atomic

__all__ = [
    "UnprotectedShardWriteWarning",
    "check_transaction",
    "sharded_atomic",
    "unprotected_write_mode",
    "writes_checked",
]


@contextmanager
def sharded_atomic(
    *aliases: str, savepoint: bool = True, two_phase: bool = False
) -> Iterator[None]:
    """``transaction.atomic`` on several databases at once, for a block that writes to
    several shards: an exception anywhere rolls every one of them back.

    Without aliases: ``default`` and every shard database, for a block that does not
    know which shards it writes to (``default`` outermost, so it commits last and
    ``transaction.on_commit()`` without ``using=`` runs after every commit).

    The commits run one after another when the block ends, so a crash (or a failed
    COMMIT) between two of them leaves the first committed and the rest not.
    ``two_phase=True`` (PostgreSQL, outermost blocks only) closes that window with
    two-phase commit; ``manage.py uid_fields resolve-prepared`` finishes what a killed
    process left prepared.
    """
    if not aliases:
        aliases = (DEFAULT_DB_ALIAS, *sorted(shard_databases()))
    if two_phase:
        with two_phase_atomic(*aliases):
            yield
        return
    with ExitStack() as stack:
        for alias in dict.fromkeys(aliases):
            stack.enter_context(transaction.atomic(using=alias, savepoint=savepoint))
        yield


#: Set while a write that checked all its shards at once runs its per-shard parts.
_checked: ContextVar[bool] = ContextVar("uid_fields_writes_checked", default=False)


@contextmanager
def writes_checked() -> Iterator[None]:
    """Within the block writes are not checked again: the caller checked every shard it
    writes to at once (a fan-out update warns once, not once per shard)."""
    token = _checked.set(True)
    try:
        yield
    finally:
        _checked.reset(token)


def unprotected_write_mode() -> str | None:
    """ "warn" or "error" when writes are checked now; None when they are not."""
    mode = conf.UNPROTECTED_SHARD_WRITES
    if mode == "debug":
        return "warn" if settings.DEBUG else None
    return mode if mode in ("warn", "error") else None


def check_transaction(model: type[Any], aliases: Iterable[str]) -> None:
    """Warn (or raise) when rows of ``model`` are written to shards ``aliases`` inside an
    atomic block on another database while these shards have no transaction open.

    Called by every write path of a model whose rows live on shards (``save()``,
    ``delete()``, the sharded QuerySet's writes) before it writes. Costs a settings
    read when the check is off (DEBUG off, the default).
    """
    if _checked.get():
        return
    mode = unprotected_write_mode()
    if mode is None:
        return
    bare = [alias for alias in dict.fromkeys(aliases) if not connections[alias].in_atomic_block]
    if not bare:
        return
    holding = [
        connection.alias
        for connection in connections.all(initialized_only=True)
        if connection.in_atomic_block and connection.alias not in bare
    ]
    if not holding:
        return  # no transaction anywhere: each write commits, as the caller expects
    message = _message(model, bare, holding)
    if mode == "error":
        raise UnprotectedShardWriteWarning(message)
    _warn(message)


def _message(model: type[Any], bare: list[str], holding: list[str]) -> str:
    shards = ", ".join(repr(alias) for alias in bare)
    blocks = ", ".join(repr(alias) for alias in holding)
    every = ", ".join(repr(alias) for alias in dict.fromkeys([*holding, *bare]))
    return (
        f"{model.__name__} rows written to {shards} inside an atomic block on {blocks} "
        f"that holds no transaction on {shards}: they commit on their own, and an "
        "exception in the block will not roll them back. Open the block with "
        f"uid_fields.django.sharded_atomic({every}), or sharded_atomic() for default and "
        "every shard (docs: transactions)"
    )


#: Files in these directories are Django's and ours: the warning points past them.
_INTERNAL = (
    os.path.dirname(os.path.abspath(django.__file__ or "")) + os.sep,
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
)


def _warn(message: str) -> None:
    """Warn naming the application's line that wrote, where the fix goes: the first
    frame outside Django and uid_fields (``skip_file_prefixes``, Python 3.12+). Older
    Pythons name the line in uid_fields that checked (a fixed ``stacklevel``): nothing
    here walks the call stack itself."""
    if sys.version_info >= (3, 12):
        warnings.warn(message, UnprotectedShardWriteWarning, skip_file_prefixes=_INTERNAL)
    else:
        warnings.warn(message, UnprotectedShardWriteWarning, stacklevel=3)
