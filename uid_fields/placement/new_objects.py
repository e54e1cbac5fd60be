"""Ids a caller chose: the id a NEW object is stored with, and a stored row's new id.

Both ORM adapters ask these two functions, so an explicit id means the same thing under
Django and SQLAlchemy, on every path (``save()``, ``create()``, ``bulk_create()``, a
session's flush, ``bulk_insert()``, a Core statement through one engine).

A new object of a model with a shard key can arrive with an id, a key, both or neither:

========================  ==============================================================
neither                   a shard key is required (``ShardKeyError``); a model without
                          one gets a fresh id by the keyless choice
key only                  a fresh id from the key
id only                   the id, placed by itself: there is no key for it to disagree
                          with (rows are found by that id)
both, agreeing            the id, as given
both, disagreeing         ``WrongShardError``, naming the id, the key and both databases:
                          stored on the id's database, the row is never found by its key
                          (``filter(owner_id=7)`` reads the key's database); stored on the
                          key's, never by its id. Inside ``allow_off_shard_writes()`` the
                          id is let through as given, on its own database.
========================  ==============================================================

An id the field made itself (at construction, from the key known then) is not the
caller's choice: when the key changed since, a fresh one is made for the new key.
Nothing is ever replaced silently otherwise.

A stored row keeps its database: an UPDATE runs where the row is, so a new primary key
naming another database strands the row where no read by either id finds it.
``check_id_change`` refuses that (a change within the database is a rename, allowed).
A new shard key (or a new parent, for a row that lives with its parent) strands the
row the same way: the UPDATE leaves it on its database while ``filter(owner_id=new)``,
a cascade from the new parent and the audit all look for it on the key's.
``check_key_change`` refuses that, by the same rule, for both ORMs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ShardKeyError, WrongShardError
from .authority import Placement, off_shard_writes_allowed

__all__ = [
    "NewId",
    "check_id_change",
    "check_key_change",
    "id_for_new_object",
    "ids_for_new_objects",
]


@dataclass(frozen=True)
class NewId:
    """The id a new object is stored with; ``made`` when it was made by the decision
    (the adapter records it as the field's own, so a later key change may replace it)."""

    value: Any
    made: bool


def id_for_new_object(
    placement: Placement,
    given: Any,
    key: Any,
    *,
    keyed: bool,
    ours: bool = False,
    made_for_key: bool = False,
    database_made: bool = False,
    what: str = "row",
    key_name: str = "shard key",
) -> NewId:
    """The id a new object is stored with (see the table of the module docstring).

    ``given`` is the id the object holds (None for none), ``key`` its shard key's value
    (None for none; a parent's id for a co-located row), ``keyed`` whether its model has
    a shard key at all, ``ours`` whether ``given`` was made by the field rather than
    chosen by the caller, and ``made_for_key`` that it was made by this placement for
    the key the object holds now: such an id fits its key by construction and is kept
    without placing the key again (the adapters record the key an id was made for, so a
    row's key is placed once, not once per write step). ``database_made`` says a
    database function makes the ids: it stamps a logical shard of its own database's
    range, not the key's, so such an id agrees with its key when it is on one of the
    key's databases. ``what`` and ``key_name`` name the model and its key in errors. Ids
    are made only when needed, so a model whose ids a database makes can ask too, with
    the id it fetched.
    """
    if made_for_key and given is not None:
        return NewId(given, made=False)
    kept = _decide(placement, given, key, keyed, ours, database_made, what, key_name)
    return kept if kept is not None else NewId(placement.new_id(key), made=True)


def ids_for_new_objects(
    placement: Placement,
    given: Sequence[Any],
    keys: Sequence[Any] | None,
    *,
    keyed: bool,
    ours: Sequence[bool] | None = None,
    made_for_key: Sequence[bool] | None = None,
    database_made: bool = False,
    what: str = "row",
    key_name: str = "shard key",
) -> list[NewId]:
    """``id_for_new_object`` for a batch (bulk inserts): the same answer for every row,
    every row checked before any id is made, and the fresh ids made with one generator
    call per logical shard (``Placement.new_ids``). ``keys``, ``ours`` and
    ``made_for_key`` run along ``given``; None for a model without a shard key and for
    ids all the caller's."""
    count = len(given)
    if keys is not None and len(keys) != count:
        raise ValueError(f"{count} ids need {count} keys, got {len(keys)}")
    out: list[NewId | None] = []
    for index, value in enumerate(given):
        if made_for_key is not None and made_for_key[index] and value is not None:
            out.append(NewId(value, made=False))  # made for this key: fits by construction
            continue
        key = None if keys is None else keys[index]
        mine = ours is not None and ours[index]
        out.append(_decide(placement, value, key, keyed, mine, database_made, what, key_name))
    fresh = [index for index, decided in enumerate(out) if decided is None]
    if fresh:
        fresh_keys = None if keys is None else [keys[index] for index in fresh]
        made = placement.new_ids(len(fresh), fresh_keys)
        for index, value in zip(fresh, made, strict=True):
            out[index] = NewId(value, made=True)
    return [decided for decided in out if decided is not None]


def _decide(
    placement: Placement,
    given: Any,
    key: Any,
    keyed: bool,
    ours: bool,
    database_made: bool,
    what: str,
    key_name: str,
) -> NewId | None:
    """The one rule: the id kept, None when a fresh one must be made, or an error."""
    if given is None:
        if key is None and keyed:
            raise ShardKeyError(
                f"{what}.{key_name} must be set before the object is saved: it picks the "
                "shard of its id"
            )
        return None
    if key is None or _agrees(placement, given, key, database_made=database_made):
        return NewId(given, made=False)
    if ours:  # made for the key the object had then: follow the key it has now
        return None
    if off_shard_writes_allowed():
        return NewId(given, made=False)
    raise _mismatch(placement, given, key, what=what, key_name=key_name)


def check_id_change(
    placement: Placement,
    new: Any,
    database: str,
    *,
    old: Any = None,
    what: str = "row",
    name: str = "id",
) -> None:
    """Refuse to give a row stored on ``database`` an id that names another database.

    The UPDATE would run on ``database`` and leave the row there, where a read by the
    new id never looks and a read by the old one no longer matches: rows cannot change
    shards (copy it under a new id and delete the old row). ``WrongShardError``, unless
    inside ``allow_off_shard_writes()``; a new id on the same database is allowed.
    ``name`` is the column changed: the id, or the parent id a co-located row follows.
    """
    expected = placement.database_of(new)
    if expected == database or off_shard_writes_allowed():
        return
    was = f"from {old} " if old is not None else ""
    raise WrongShardError(
        f"changing the {name} of this {what} {was}to {new} would strand the row: it is "
        f"stored on {database!r} and stays there, but {name} {new} lives on {expected!r}, "
        f"so no read by either {name} finds it. Rows cannot change shards: insert a copy "
        "with the new id and delete the old row (or wrap a deliberate change in "
        "allow_off_shard_writes())",
        database=database,
        expected=expected,
    )


def check_key_change(
    placement: Placement,
    new_key: Any,
    database: str,
    *,
    old: Any = None,
    what: str = "row",
    name: str = "shard key",
    by_id: bool = False,
) -> None:
    """Refuse to give a row stored on ``database`` a shard key whose rows live elsewhere.

    An UPDATE runs where the row is and leaves it there; a read by the new key
    (``filter(owner_id=new)``), a cascade from the new parent and ``audit`` look on the
    key's database, so the row would be lost to its own key. A key whose rows live on
    ``database`` (one of them, while the key's own database is closed to new keys) is
    allowed: the row is still found by it. ``placement`` is the row's id field's;
    ``new_key`` the key's new value (a parent's id for a co-located child). ``by_id``
    says ``new_key`` is the id of the parent a follower lives with, placed by
    ``placement`` (the parent's) as an id rather than as a shard key. ``name`` is the
    column changed. ``WrongShardError``, unless inside ``allow_off_shard_writes()``.
    """
    if off_shard_writes_allowed():
        return
    wanted = (placement.database_of(new_key),) if by_id else placement.databases_for_key(new_key)
    if database in wanted:
        return
    expected = wanted[-1]
    was = f"from {old!r} " if old is not None else ""
    raise WrongShardError(
        f"changing {name} of this {what} {was}to {new_key!r} would strand the row: it is "
        f"stored on {database!r} and an UPDATE leaves it there, but {name}={new_key!r} "
        f"puts its rows on {expected!r}, so reads by that key (and cascades from it) "
        "would never find it. Rows cannot change shards: move it with a copy under the "
        "new key and a delete of the old row in one sharded_atomic (or wrap a deliberate "
        "change in allow_off_shard_writes())",
        database=database,
        expected=expected,
    )


def _agrees(placement: Placement, given: Any, key: Any, *, database_made: bool) -> bool:
    if database_made and placement.shard_map is not None:
        return placement.database_of(given) in placement.databases_for_key(key)
    return placement.fits_key(given, key)


def _mismatch(
    placement: Placement, given: Any, key: Any, *, what: str, key_name: str
) -> WrongShardError:
    """The error of an explicit id that is not where its key puts the rows."""
    id_shard, key_shard = placement.logical_shard_of(given), placement.logical_shard_for_key(key)
    if placement.shard_map is None:  # no databases known yet: logical shards only
        id_at, key_at = f"logical shard {id_shard}", f"logical shard {key_shard}"
    else:
        id_at, key_at = placement.database_of(given), placement.database_for_key(key)
    if id_at != key_at:
        where = (
            f"lives on {id_at!r} (logical shard {id_shard}), but {key_name}={key!r} puts "
            f"its rows on {key_at!r} (logical shard {key_shard}): stored by its id, the row "
            "would never be found by its key, and stored by its key never by its id"
        )
    else:
        where = (
            f"is on {id_at!r} as {key_name}={key!r}'s rows are, but in logical shard "
            f"{id_shard}, not the key's {key_shard}: a split of the database would part "
            "it from the key's rows"
        )
    return WrongShardError(
        f"this {what}'s id {given} {where}. Leave the id out to have one made from the "
        "key, give an id made for this key, or wrap a deliberate copy in "
        "allow_off_shard_writes()",
        database=id_at,
        expected=key_at,
    )
