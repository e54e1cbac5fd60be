"""Families: models whose rows are placed through a chain of keys that ends at one root.

A model on shards places its rows in one of three ways: by their own id or a key of
their own (a *root*: ``Tenant`` by its id, ``Photo`` by ``owner_id``), or with the row
they follow (a *child* whose shard key is its parent, ``Project`` keyed by ``tenant``; a
*follower* whose own ids name no shard, ``Comment`` with its ``task``). Following the
parents from any model ends at its root, and the models that end at the same root form a
family: every row of it lives on the database of the root row it descends from, however
many levels down (``Comment -> Task -> Project -> Tenant``).

So a relation between two members of one family joins rows of one database whenever its
value stays inside the root row's family (``Task.tenant`` naming the project's tenant,
``Task.parent`` another task of the tenant, ``TaskLabel.label`` a label of the tenant):
the database can hold its foreign-key constraint, cascade it, join it and keep a
many-to-many table beside it. Only the shard key itself is right by construction; the
other keys of a family could name a row of another root, so each write is checked
(``check_family_key``): the row it names must live on the writing row's database. A key
between two roots (``Tenant.parent``) or into another family may cross databases.

Knows no ORM: a model is any hashable name, ``parent_of`` says which model a model's
rows follow (None for a root, and for a model that lives on no shard), ``on_shards``
whether its rows live on shards at all. Both adapters decide relations through here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from typing import TypeVar

from ..errors import WrongShardError
from .authority import Placement, off_shard_writes_allowed

__all__ = [
    "Relation",
    "check_family_key",
    "colocated",
    "family_chain",
    "family_root",
    "relation_between",
]

M = TypeVar("M", bound=Hashable)


class Relation(enum.Enum):
    """Where the two rows of a relation live, relative to each other."""

    #: Neither side lives on shards: the ORM's own rules (one database, normally).
    ORDINARY = "ordinary"
    #: The source's placement link (its shard key, or a follower's parent): the two
    #: rows are on one database by construction.
    LINK = "link"
    #: Two members of one family: the rows are on one database while the key names a row
    #: of the same root row's family; each write is checked (``check_family_key``).
    FAMILY = "family"
    #: The rows may be on different databases: no constraint, no join, no on_delete
    #: inside one database.
    ACROSS = "across"

    @property
    def same_database(self) -> bool:
        """Whether rows of the relation share a database (so a constraint can hold)."""
        return self is not Relation.ACROSS


def family_chain(model: M, parent_of: Callable[[M], M | None]) -> tuple[M, ...]:
    """``model``, the model its rows follow, that one's, ... up to the root.

    ``ValueError`` for a cycle (a model that follows itself through its parents), which
    places no row.
    """
    chain = [model]
    parent = parent_of(model)
    while parent is not None:
        if parent in chain:
            names = " -> ".join(str(m) for m in [*chain, parent])
            raise ValueError(f"the placement links form a cycle: {names}")
        chain.append(parent)
        parent = parent_of(parent)
    return tuple(chain)


def family_root(model: M, parent_of: Callable[[M], M | None]) -> M:
    """The model at the top of ``model``'s chain of placement links (itself for a root)."""
    return family_chain(model, parent_of)[-1]


def relation_between(
    source: M,
    target: M,
    *,
    parent_of: Callable[[M], M | None],
    on_shards: Callable[[M], bool],
    link: bool = False,
) -> Relation:
    """What a key from rows of ``source`` to rows of ``target`` joins.

    ``link``: the key is ``source``'s own placement link (its shard key or a follower's
    parent key). Two models of one family share a database for every key between them,
    except a key from a root to the same root model: those are two root rows, two
    families, placed independently.
    """
    source_placed, target_placed = on_shards(source), on_shards(target)
    if not source_placed and not target_placed:
        return Relation.ORDINARY
    if not (source_placed and target_placed):
        return Relation.ACROSS
    if link:
        return Relation.LINK
    root = family_root(source, parent_of)
    if root != family_root(target, parent_of):
        return Relation.ACROSS
    if source == target == root:
        return Relation.ACROSS  # a root pointing at another root: two families
    return Relation.FAMILY


def colocated(
    first: M,
    second: M,
    *,
    parent_of: Callable[[M], M | None],
    on_shards: Callable[[M], bool],
) -> bool:
    """Whether rows of the two models that point at each other share a database.

    True inside one family (any depth, either direction, siblings, a self-key below the
    root) and when neither lives on shards.
    """
    relation = relation_between(first, second, parent_of=parent_of, on_shards=on_shards)
    return relation.same_database


def check_family_key(
    target: Placement, value: object, database: str, *, what: str, key: str
) -> None:
    """Refuse a key inside a family that names a row on another database.

    ``target`` places the rows the key points at, ``value`` is the key (their id),
    ``database`` where the writing row lives. The foreign-key constraint of that database
    would refuse the row too, but on PostgreSQL and SQLite only at COMMIT (constraints
    are deferred), with a message that names no shard. Inside
    ``allow_off_shard_writes()`` (copies, shard moves) nothing is checked.
    """
    if off_shard_writes_allowed():
        return
    try:
        expected = target.database_of(value)
    except (TypeError, ValueError):
        return  # no id a shard can hold: the constraint refuses it
    if expected != database:
        raise WrongShardError(
            f"{what}.{key} names {value}, a row on {expected!r}, but this {what} lives on "
            f"{database!r}: a key inside a family must name a row of the same database "
            "(normally of the same root row: the task's own tenant, a label of that "
            "tenant), where its foreign-key constraint holds",
            database=database,
            expected=expected,
        )
