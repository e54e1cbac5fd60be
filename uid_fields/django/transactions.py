"""Transactions over several shards: ``sharded_atomic``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from django.db import transaction

from .twophase import two_phase_atomic

__all__ = ["sharded_atomic"]


@contextmanager
def sharded_atomic(
    *aliases: str, savepoint: bool = True, two_phase: bool = False
) -> Iterator[None]:
    """``transaction.atomic`` on several databases at once, for a block that writes to
    several shards: an exception anywhere rolls every one of them back.

    The commits run one after another when the block ends, so a crash (or a failed
    COMMIT) between two of them leaves the first committed and the rest not.
    ``two_phase=True`` (PostgreSQL, outermost blocks only) closes that window with
    two-phase commit; ``manage.py uid_fields resolve-prepared`` finishes what a killed
    process left prepared.
    """
    if two_phase:
        with two_phase_atomic(*aliases):
            yield
        return
    with ExitStack() as stack:
        for alias in dict.fromkeys(aliases):
            stack.enter_context(transaction.atomic(using=alias, savepoint=savepoint))
        yield
