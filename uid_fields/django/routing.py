"""Which database a row of a sharded model lives on, from its id or its shard key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import models

from ..errors import UnroutableQueryError
from .fields import UidField, _is_db_default

__all__ = ["ShardRouter", "UnroutableQueryError", "database_for_instance", "sharded_pk"]


def sharded_pk(model: Any) -> UidField | None:
    """The pk field that shards ``model`` (historical models too: only ``_meta`` is used)."""
    meta = getattr(model, "_meta", None)
    pk = getattr(meta, "pk", None)
    return pk if isinstance(pk, UidField) and pk.shards_name is not None else None


def colocated(model: type[models.Model], other: type[models.Model]) -> bool:
    """Whether rows of the two models that point at each other share a database.

    True when one model's ``shard_key`` is a foreign key to the other (its rows live
    with their parent), or when neither is sharded.
    """
    field, other_field = sharded_pk(model), sharded_pk(other)
    if field is None and other_field is None:
        return True
    for child, parent in ((field, other), (other_field, model)):
        if child is not None and child.shard_key:
            key = child.shard_key_field()
            if (
                key.is_relation
                and key.related_model is not None
                and issubclass(parent, key.related_model)
            ):
                return True
    return False


def _pointer(instance: models.Model, model: type[models.Model]) -> Any:
    """The id ``instance`` holds in its one foreign key to ``model``, if it has one."""
    keys = [
        f
        for f in instance._meta.concrete_fields
        if f.is_relation and f.related_model is not None and issubclass(model, f.related_model)
    ]
    return getattr(instance, keys[0].attname) if len(keys) == 1 else None


def database_for_instance(instance: models.Model) -> str:
    """The alias of a row of a sharded model; gives it its id first if it has none."""
    field = sharded_pk(type(instance))
    assert field is not None and field.shard_map is not None
    value = getattr(instance, field.attname)
    if (value is None or _is_db_default(value)) and field.database_default:
        logical = field.logical_shard_for(instance) if field.shard_key else None
        if logical is None:
            raise UnroutableQueryError(
                f"a new {type(instance).__name__} gets its id from the database, so "
                "its shard must come from its shard key or from .using(alias)"
            )
        return field.shard_map.database(logical)
    value = field.fill(instance)  # also re-makes an id whose shard key changed
    return field.shard_map.database_for(value)


_pinned: ContextVar[dict[type[models.Model], str] | None] = ContextVar("uid_pinned", default=None)


@contextmanager
def pin_shard(model: type[models.Model], alias: str) -> Iterator[None]:
    """Within the block, unhinted routing of ``model`` goes to ``alias``.

    For code that asks the router about a model without naming a row, such as the
    admin opening ``transaction.atomic(using=router.db_for_write(model))``.
    """
    current = dict(_pinned.get() or {})
    current[model] = alias
    token = _pinned.set(current)
    try:
        yield
    finally:
        _pinned.reset(token)


def pinned_shard(model: type[models.Model]) -> str | None:
    return (_pinned.get() or {}).get(model)


def unroutable(model: type[models.Model]) -> UnroutableQueryError:
    name = model.__name__
    return UnroutableQueryError(
        f"this {name} query names no shard: filter by its id (pk=, pk__in=) or its shard "
        f"key, pick one with .using(alias), or fan out with {name}.objects.on_all_shards()"
    )


class ShardRouter:
    """Routes sharded models by id; every other model is left to other routers."""

    def _route(
        self, model: type[models.Model], hints: dict[str, Any], write: bool = False
    ) -> str | None:
        instance = hints.get("instance")
        field = sharded_pk(model)
        if instance is not None:
            if field is not None and isinstance(instance, model):
                if not instance._state.adding and instance._state.db is not None:
                    return instance._state.db  # a loaded row goes back where it came from
                return database_for_instance(instance)
            if field is None or colocated(model, type(instance)):
                # A related manager's parent or an FK value on the same database.
                return instance._state.db  # type: ignore[no-any-return]
            pointed = _pointer(instance, model)
            if pointed is not None:  # a foreign key's target: route by its id
                return field.shard_map.database_for(pointed)  # type: ignore[union-attr]
            # A related manager of a row these rows do not live with: a sharded
            # queryset fans out (see ShardedQuerySet._add_hints); a new row is routed
            # by its own id when it is saved.
            return None
        if field is not None:
            from .conf import conf

            pinned = pinned_shard(model)
            if pinned is not None:
                return pinned
            if conf.STRICT_ROUTING:
                raise unroutable(model)
        return None

    def db_for_read(self, model: type[models.Model], **hints: Any) -> str | None:
        return self._route(model, hints)

    def db_for_write(self, model: type[models.Model], **hints: Any) -> str | None:
        return self._route(model, hints, write=True)

    def allow_relation(self, obj1: models.Model, obj2: models.Model, **hints: Any) -> bool | None:
        if sharded_pk(type(obj1)) is None and sharded_pk(type(obj2)) is None:
            return None
        db1, db2 = obj1._state.db, obj2._state.db
        if db1 is None or db2 is None:
            return None
        for child, parent in ((obj1, obj2), (obj2, obj1)):
            if child._state.adding and colocated(type(child), type(parent)):
                return True  # an unsaved row follows its shard key when it is saved
        if not colocated(type(obj1), type(obj2)):
            return True  # a soft reference across shards (no database constraint)
        return bool(db1 == db2)

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        from .conf import conf, shard_databases

        model = hints.get("model")
        if model is None and model_name is not None:
            from django.apps import apps

            try:
                model = apps.get_model(app_label, model_name)
            except LookupError:
                return None
        if model is None:
            return None
        field = sharded_pk(model)
        if field is not None:
            assert field.shard_map is not None
            if db in field.shard_map.databases:
                return True
            return db == "default" and conf.MIGRATE_SHARDED_ON_DEFAULT
        if db in shard_databases() and db != "default":
            return conf.UNSHARDED_ON_SHARDS
        return None
