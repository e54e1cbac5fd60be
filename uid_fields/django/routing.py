"""Which database a row of a sharded model lives on, from its id or its shard key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, models
from django.db import router as db_router
from django.db.models.signals import pre_save
from django.dispatch import receiver

from ..errors import ShardKeyError, ShardRoutingError, WrongShardError
from ..placement import allow_off_shard_writes, off_shard_writes_allowed
from .compat import asked_by_model_delete
from .conf import conf, shard_databases
from .fields import UidField, _is_db_default
from .replicas import replica_primaries
from .transactions import check_transaction, unprotected_write_mode

__all__ = [
    "ShardRouter",
    "allow_off_shard_writes",
    "check_write",
    "database_for_instance",
    "sharded_pk",
]


def sharded_pk(model: Any) -> UidField | None:
    """The pk field that shards ``model`` (historical models too: only ``_meta`` is used)."""
    meta = getattr(model, "_meta", None)
    pk = getattr(meta, "pk", None)
    return pk if isinstance(pk, UidField) and pk.shards_name is not None else None


def parent_link(model: Any) -> Any:
    """The foreign key a model's rows follow to their sharded parent's database, if any.

    A model whose id is a uid field without a shard map of its own (``SnowflakeField(
    primary_key=True)``) and that has a foreign key (with a database constraint) to a
    sharded model lives with that parent, as the SQLAlchemy side places such a table:
    its own ids name no shard. The core's placement of the parent places it.
    """
    meta = getattr(model, "_meta", None)
    pk = getattr(meta, "pk", None)
    if meta is None or not isinstance(pk, UidField) or pk.shards_name is not None:
        return None
    for field in meta.concrete_fields:
        target = field.related_model if field.is_relation else None
        if target is not None and getattr(field, "db_constraint", False) and sharded_pk(target):
            return field
    return None


def colocated(model: type[models.Model], other: type[models.Model]) -> bool:
    """Whether rows of the two models that point at each other share a database.

    True when one model's ``shard_key`` is a foreign key to the other (its rows live
    with their parent), or when neither is sharded.
    """
    for follower, leader in ((model, other), (other, model)):
        link = parent_link(follower)
        if link is not None and issubclass(leader, link.related_model):
            return True
    field, other_field = sharded_pk(model), sharded_pk(other)
    if field is None and other_field is None:
        return parent_link(model) is None and parent_link(other) is None
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
    if field is None:
        link = parent_link(type(instance))
        assert link is not None, f"{type(instance).__name__} is not sharded"
        return _follower_database(instance, link)
    assert field.shard_map is not None
    value = getattr(instance, field.attname)
    if (value is None or _is_db_default(value)) and field.database_default:
        logical = field.logical_shard_for(instance) if field.shard_key else None
        if logical is None:
            raise ShardRoutingError(
                f"a new {type(instance).__name__} gets its id from the database, so "
                "its shard must come from its shard key or from .using(alias)"
            )
        return field.shard_map.database(logical)
    value = field.fill(instance)  # also re-makes an id whose shard key changed
    return field.placement.database_of(value)


def _follower_database(instance: models.Model, link: Any) -> str:
    parent_id = getattr(instance, link.attname)
    if parent_id is None:
        raise ShardKeyError(
            f"{type(instance).__name__}.{link.name} must be set before the object is saved: "
            "the row lives on its parent's database"
        )
    parent_field = sharded_pk(link.related_model)
    assert parent_field is not None
    return parent_field.placement.database_of(parent_id)


def _placed_or_none(instance: models.Model) -> str | None:
    """The database of a new row, or None while its shard key is missing or invalid, or
    disagrees with the id the caller gave.

    Validation asks the router too (``full_clean()`` validating constraints, a ModelForm's
    ``is_valid()``): a missing key must become the form's "This field is required.", not
    an exception. ``save()`` still refuses the row, in the ``pre_save`` write check.
    """
    try:
        return database_for_instance(instance)
    except (ShardKeyError, WrongShardError):
        return None


def _lives_on_shards(model: Any) -> bool:
    return sharded_pk(model) is not None or parent_link(model) is not None


def check_write(instance: models.Model, using: str) -> None:
    """Refuse to store a row of a sharded model on a database its id does not name.

    ``save(using=...)``, ``save_base(raw=True, using=...)`` (fixtures) and every other
    write path end here, through the ``pre_save`` signal.
    """
    if off_shard_writes_allowed() or not _lives_on_shards(type(instance)):
        return
    expected = database_for_instance(instance)
    if expected != using:
        raise WrongShardError(
            f"this {type(instance).__name__} (id {instance.pk}) lives on {expected!r}, but "
            f"the write was sent to {using!r}: a row stored off its shard could not be "
            "found by its id (load fixtures with `manage.py uid_fields loaddata`, or "
            "wrap a deliberate copy in uid_fields.django.allow_off_shard_writes())",
            database=using,
            expected=expected,
        )


@receiver(pre_save, dispatch_uid="uid_fields.check_write")
def _check_write_on_save(
    sender: type[models.Model], instance: models.Model, using: str, **kwargs: Any
) -> None:
    check_write(instance, using)
    if _lives_on_shards(sender):
        check_transaction(sender, [using])


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


def _unhinted(model: type[models.Model]) -> str | None:
    """A query of rows on shards that names none: the pinned shard, or strict refusal."""
    pinned = pinned_shard(model)
    if pinned is not None:
        return pinned
    if conf.STRICT_ROUTING:
        raise unroutable(model)
    return None


def unroutable(model: type[models.Model]) -> ShardRoutingError:
    name = model.__name__
    return ShardRoutingError(
        f"this {name} query names no shard: filter by its id (pk=, pk__in=) or its shard "
        f"key, pick one with .using(alias), or fan out with {name}.objects.on_all_shards()"
    )


def _home(model: Any) -> str | None:
    """The shard map a model's rows live on (a follower's: its parent's); None if none."""
    field = sharded_pk(model)
    link = parent_link(model) if field is None else None
    if link is not None:
        field = sharded_pk(link.related_model)
    return None if field is None else str(field.shards_name)


def app_representative(app_label: str) -> type[models.Model] | None:
    """A model of ``app_label`` that speaks for all of them, when they all live alike.

    ``RunPython`` and ``RunSQL`` without hints ask ``allow_migrate(db, app_label)`` and
    nothing more, so Django's documented data migration (the historical model,
    ``.using(schema_editor.connection.alias)``) ran on every database, and failed where
    the table is not. When every model of the app lives on the same shard map, or none
    on any, the operation goes where those models' tables are; an app with both kinds
    (or none) gives no answer, and its operations say which model they touch
    (``hints={"model_name": ...}``, docs/routing.md).
    """
    try:
        found = list(apps.get_app_config(app_label).get_models())
    except LookupError:
        return None
    homes = {_home(model) for model in found}
    return found[0] if len(homes) == 1 else None


class ShardRouter:
    """Routes sharded models by id; every other model is left to other routers."""

    def _route(
        self, model: type[models.Model], hints: dict[str, Any], write: bool = False
    ) -> str | None:
        instance = hints.get("instance")
        field = sharded_pk(model)
        link = parent_link(model) if field is None else None
        if link is not None:
            return self._route_follower(model, link, instance)
        if field is None:
            return self._route_ordinary(model, hints, write)
        if instance is not None:
            if isinstance(instance, model):
                loaded = not instance._state.adding and instance._state.db is not None
                if loaded and getattr(instance, field.attname) is not None:
                    return instance._state.db  # a loaded row goes back where it came from
                # New, or a copy (obj.pk = None): where its (new) id says.
                return _placed_or_none(instance)
            if colocated(model, type(instance)):
                # A related manager's parent or an FK value on the same database.
                return instance._state.db  # type: ignore[no-any-return]
            pointed = _pointer(instance, model)
            if pointed is not None:  # a foreign key's target: route by its id
                return field.placement.database_of(pointed)
            # A related manager of a row these rows do not live with: a sharded
            # queryset fans out (see ShardedQuerySet._add_hints); a new row is routed
            # by its own id when it is saved.
            return None
        return _unhinted(model)

    def _route_ordinary(
        self, model: type[models.Model], hints: dict[str, Any], write: bool
    ) -> str | None:
        """A model that is not sharded: never the shard of a sharded row it was reached from.

        Left alone (None), Django would fall back to the hinted instance's database, so
        ``order.coupon`` and ``customer.notes`` would read the shard. Reached from a
        sharded row, the other routers are asked without that hint, then ``default``.
        """
        instance = hints.get("instance")
        if instance is None or not _lives_on_shards(type(instance)):
            return None  # Django's own rules (and the other routers) decide
        rest = {key: value for key, value in hints.items() if key != "instance"}
        method = "db_for_write" if write else "db_for_read"
        for other in db_router.routers:
            if isinstance(other, ShardRouter):
                continue
            chosen = getattr(other, method, None)
            alias = chosen(model, **rest) if chosen is not None else None
            if alias:
                return str(alias)
        return DEFAULT_DB_ALIAS

    def _route_follower(self, model: type[models.Model], link: Any, instance: Any) -> str | None:
        """A row that lives with its parent: the parent's id names the database."""
        if isinstance(instance, model):
            if not instance._state.adding and instance._state.db is not None:
                return instance._state.db
            return _placed_or_none(instance)
        if instance is not None and isinstance(instance, link.related_model):
            return instance._state.db  # type: ignore[no-any-return]
        return _unhinted(model)

    def db_for_read(self, model: type[models.Model], **hints: Any) -> str | None:
        return self._route(model, hints)

    def db_for_write(self, model: type[models.Model], **hints: Any) -> str | None:
        alias = self._route(model, hints, write=True)
        if (
            alias is not None
            and isinstance(hints.get("instance"), model)
            and unprotected_write_mode() is not None
            and _lives_on_shards(model)
            and asked_by_model_delete()
        ):
            check_transaction(model, [alias])  # obj.delete(): no signal comes before it
        return alias

    def allow_relation(self, obj1: models.Model, obj2: models.Model, **hints: Any) -> bool | None:
        if sharded_pk(type(obj1)) is None and sharded_pk(type(obj2)) is None:
            return None
        db1, db2 = obj1._state.db, obj2._state.db
        if db1 is None or db2 is None:
            return None
        primaries = replica_primaries()  # a row being read from a replica lives on its primary
        db1, db2 = primaries.get(db1, db1), primaries.get(db2, db2)
        for child, parent in ((obj1, obj2), (obj2, obj1)):
            if child._state.adding and colocated(type(child), type(parent)):
                return True  # an unsaved row follows its shard key when it is saved
        if not colocated(type(obj1), type(obj2)):
            return True  # a soft reference across shards (no database constraint)
        return bool(db1 == db2)

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        if db in replica_primaries():
            return False  # a replica copies its primary's schema; it is never migrated
        model = hints.get("model")
        if model is None and model_name is not None:
            try:
                model = apps.get_model(app_label, model_name)
            except LookupError:
                return None
        elif model is None:
            model = app_representative(app_label)  # RunPython/RunSQL without hints
        if model is None:
            return None
        field = sharded_pk(model)
        link = parent_link(model) if field is None else None
        if link is not None:
            field = sharded_pk(link.related_model)
        if field is not None:
            assert field.shard_map is not None
            if db in field.shard_map.migrated_databases:
                return True
            return db == "default" and conf.MIGRATE_SHARDED_ON_DEFAULT
        if db in shard_databases() and db != "default":
            return conf.UNSHARDED_ON_SHARDS
        return None
