"""The core's rules for ids a caller chose, applied to Django's batch paths.

``bulk_create`` gives every object its id by ``uid_fields.placement.ids_for_new_objects``
(the batch form of the rule ``UidField.fill`` applies to one object), and
``QuerySet.update(id=...)`` asks ``check_id_change`` for each database it runs on. The
rules themselves live in the core, shared with SQLAlchemy; this module only reads the
objects and the update's arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connections, models

from ...placement import check_id_change, ids_for_new_objects
from ..fields import Made, UidField, _is_db_default, made_entry, made_for_key, record_made

__all__ = ["fill_ids", "new_ids_in", "refuse_id_moves"]


def fill_ids(objs: Sequence[models.Model]) -> list[str] | None:
    """Every object's id by the core's rule for new objects, for the whole batch at once;
    the database of each object when the model has a shard map (None otherwise).

    Every object is checked before any id is made, so an explicit id that disagrees
    with its shard key is refused (``WrongShardError``) and nothing is inserted; ids the
    field made for a key changed since are made again; missing ids are made with one
    generator call per logical shard. Each row is placed once: an id the field made
    for the key the object still holds keeps the database recorded with it.
    """
    if not objs:
        return None
    field = type(objs[0])._meta.pk
    if not isinstance(field, UidField) or field.database_default:
        return None
    placement = field.placement
    attname = field.attname
    given = [getattr(obj, attname) for obj in objs]
    shard_map = placement.shard_map if field.shards_name is not None else None
    if not field.shard_key:
        if None in given:
            chosen = ids_for_new_objects(placement, given, None, keyed=False)
            for obj, decided in zip(objs, chosen, strict=True):
                if decided.made:
                    record_made(obj, attname, Made(decided.value))
            given = [decided.value for decided in chosen]
        # ids to keep, and no key for them to disagree with
        return None if shard_map is None else [shard_map.database_for(v) for v in given]
    key_attname = field.shard_key_attname()
    placed = _placed_at_construction(objs, attname, key_attname, placement, shard_map)
    if placed is not None:  # every id made for the key its object still holds
        return None if shard_map is None else placed  # type: ignore[return-value]
    keys = [getattr(obj, key_attname) for obj in objs]
    entries = [
        None if value is None else made_entry(obj, attname, value)
        for obj, value in zip(objs, given, strict=True)
    ]
    fitting = [made_for_key(e, key, placement) for e, key in zip(entries, keys, strict=True)]
    chosen = ids_for_new_objects(
        placement,
        given,
        keys,
        keyed=True,
        ours=[entry is not None for entry in entries],
        made_for_key=fitting,
        what=field.model.__name__,
        key_name=key_attname,
    )
    databases: list[str] = []
    for obj, decided, key, entry, fits in zip(objs, chosen, keys, entries, fitting, strict=True):
        if decided.made:
            record_made(obj, attname, Made(decided.value, key, placement))
        if shard_map is None:
            continue
        if fits and entry is not None and entry.database is not None:
            databases.append(entry.database)  # placed when the id was made
        else:
            databases.append(shard_map.database_for(decided.value))
    return None if shard_map is None else databases


def _placed_at_construction(
    objs: Sequence[models.Model],
    attname: str,
    key_attname: str,
    placement: Any,
    shard_map: Any,
) -> list[str | None] | None:
    """The database of every object when each holds the id the field made for it, for
    the key it still holds, by ``placement`` (the usual batch: objects built with their
    key): ``ids_for_new_objects`` would keep every id as it is, and each was placed when
    it was made. None as soon as one object is not so: the batch takes the general rule.
    One pass, no per-row lists."""
    out: list[str | None] = []
    for obj in objs:
        made: dict[str, Made] | None = getattr(obj._state, "uid_made", None)
        entry = None if made is None else made.get(attname)
        if entry is None or entry.placement is not placement:
            return None
        value = getattr(obj, attname)
        key = getattr(obj, key_attname)
        if value is None or key is None or entry.value != value or entry.key != key:
            return None
        if entry.database is not None:
            out.append(entry.database)
        else:
            out.append(None if shard_map is None else shard_map.database_for(value))
    return out


def new_ids_in(field: UidField, kwargs: Mapping[str, Any]) -> list[Any]:
    """The ids an ``update(**kwargs)`` sets the sharded id field to (as Python values).

    An id set to an SQL expression (``F("id") + 1``) cannot be known before it runs and
    is not returned, as the SQLAlchemy write guard does not see one either.
    """
    names = ("pk", field.name, field.attname)
    return [
        field.to_python(value)
        for name, value in kwargs.items()
        if name in names and value is not None and not hasattr(value, "resolve_expression")
    ]


def refuse_id_moves(field: UidField, new_ids: Iterable[Any], aliases: Iterable[str]) -> None:
    """Refuse an UPDATE that would give rows on ``aliases`` an id naming another database:
    the rows stay where they are, where no read by the new id looks."""
    databases = tuple(aliases)
    for value in new_ids:
        for alias in databases:
            check_id_change(field.placement, value, alias, what=field.model.__name__)


def fetch_database_ids(field: UidField, alias: str, objs: list[models.Model]) -> None:
    """Ids for database-made keys in one round trip, so bulk inserts can return them."""
    missing = [o for o in objs if _is_db_default(getattr(o, field.attname))]
    if not missing:
        return
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT {field.db_function}() FROM generate_series(1, %s)", [len(missing)])
        ids = sorted(row[0] for row in cursor.fetchall())
    for obj, value in zip(missing, ids, strict=True):
        setattr(obj, field.attname, value)
