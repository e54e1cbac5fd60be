"""Which database a row of a sharded model lives on, from its id or its shard key, and
which relations join rows of one database (the core's families, translated to models)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.db import DEFAULT_DB_ALIAS, models
from django.db import router as db_router
from django.db.models.signals import m2m_changed, pre_save

from ..errors import ConfigurationError, ShardKeyError, ShardRoutingError, WrongShardError
from ..placement import (
    allow_off_shard_writes,
    check_key_change,
    families,
    off_shard_writes_allowed,
)
from ..placement.families import Relation
from .conf import conf, shard_databases
from .connections.replicas import replica_primaries
from .connections.transactions import check_transaction
from .fields import UidField, _is_db_default

__all__ = [
    "ShardRouter",
    "allow_off_shard_writes",
    "check_family_keys",
    "check_stored_key",
    "check_write",
    "colocated",
    "database_for_instance",
    "family_keys",
    "family_root",
    "key_link",
    "placement_link",
    "placing_field",
    "relation_of",
    "sharded_pk",
    "watch_writes",
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
    its own ids name no shard. The core's placement of the parent places it. So does
    the table Django makes for a many-to-many relation inside one family: its rows live
    with the rows they link (``_many_to_many_link``).
    """
    meta = getattr(model, "_meta", None)
    pk = getattr(meta, "pk", None)
    if meta is None:
        return None
    if meta.auto_created and not isinstance(pk, UidField):
        return _many_to_many_link(meta)
    if not isinstance(pk, UidField) or pk.shards_name is not None:
        return None
    for field in meta.concrete_fields:
        target = field.related_model if field.is_relation else None
        if target is not None and getattr(field, "db_constraint", False) and sharded_pk(target):
            return field
    return None


def placing_field(model: Any) -> UidField | None:
    """The sharded id whose placement decides where ``model``'s rows live: the model's
    own, or, for a follower, its parent's (None for a model that is not on shards)."""
    field = sharded_pk(model)
    if field is None:
        link = parent_link(model)
        field = sharded_pk(link.related_model) if link is not None else None
    return field


def _many_to_many_link(meta: Any) -> Any:
    """The key of an automatic many-to-many table whose two sides are one family: the
    key to the first side whose ids name their database (the source's, normally)."""
    keys = [f for f in meta.concrete_fields if f.is_relation and isinstance(f.related_model, type)]
    if len(keys) != 2:
        return None
    first, second = (key.related_model for key in keys)
    if not (_lives_on_shards(first) and _lives_on_shards(second) and colocated(first, second)):
        return None
    return next((key for key in keys if sharded_pk(key.related_model) is not None), None)


def placement_link(model: Any) -> Any:
    """The key a model's rows follow to the database of the row it names: a child's
    shard key that is a foreign key to a sharded model, or a follower's link
    (``parent_link``). None for a root and for a model that lives on no shard."""
    field = sharded_pk(model)
    if field is None:
        return parent_link(model)
    if not field.shard_key:
        return None
    try:
        key = model._meta.get_field(field.shard_key)
    except FieldDoesNotExist:
        return None  # E008 says so
    target = key.related_model if key.is_relation else None
    return key if isinstance(target, type) and sharded_pk(target) is not None else None


def _concrete(model: Any) -> Any:
    meta = getattr(model, "_meta", None)
    concrete = getattr(meta, "concrete_model", None)
    return concrete if concrete is not None else model


def placement_parent(model: Any) -> Any:
    """The model whose rows ``model``'s rows live with (None for a root)."""
    link = placement_link(model)
    return _concrete(link.related_model) if link is not None else None


def family_root(model: Any) -> Any:
    """The model at the top of ``model``'s chain of shard keys (``Comment -> Task ->
    Project -> Tenant`` gives ``Tenant``); a root is its own."""
    return families.family_root(_concrete(model), placement_parent)


def colocated(model: Any, other: Any) -> bool:
    """Whether rows of the two models that point at each other share a database.

    True inside one family, however deep (``Task`` and ``Tenant`` through ``Project``,
    two children of the tenant, a follower and any of them, a self-key below the root),
    and when neither model lives on shards; false between two roots and into another
    family. The core decides (``uid_fields.placement.families``).
    """
    return families.colocated(
        _concrete(model), _concrete(other), parent_of=placement_parent, on_shards=_lives_on_shards
    )


_relations: weakref.WeakKeyDictionary[Any, Relation] = weakref.WeakKeyDictionary()


def relation_of(field: Any) -> Relation:
    """What a foreign key joins: rows of one database (``LINK``, ``FAMILY``, ``ORDINARY``)
    or rows that may live on two (``ACROSS``)."""
    found = _relations.get(field)
    if found is None:
        model = _concrete(field.model)
        found = _relations[field] = families.relation_between(
            model,
            _concrete(field.related_model),
            parent_of=placement_parent,
            on_shards=_lives_on_shards,
            link=field == placement_link(model),
        )
    return found


_family_keys: weakref.WeakKeyDictionary[Any, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def family_keys(model: Any) -> tuple[Any, ...]:
    """The foreign keys of ``model`` into its own family besides its shard key whose
    targets' ids name their database: what every write of a row checks."""
    found = _family_keys.get(model)
    if found is None:
        found = _family_keys[model] = tuple(
            field
            for field in model._meta.concrete_fields
            if field.is_relation
            and isinstance(field.related_model, type)
            and relation_of(field) is Relation.FAMILY
            and (target := sharded_pk(field.related_model)) is not None
            and field.target_field == target
        )
    return found


def check_family_keys(instance: models.Model, using: str) -> None:
    """Refuse a row whose key inside its family names a row of another database
    (``WrongShardError``): ``Task.tenant`` must name a tenant of the task's shard."""
    for field in family_keys(type(instance)):
        value = getattr(instance, field.attname)
        target = sharded_pk(field.related_model)
        if value is not None and target is not None:
            families.check_family_key(
                target.placement, value, using, what=type(instance).__name__, key=field.name
            )


def key_link(model: Any) -> tuple[UidField, Any, bool] | None:
    """What places a stored row of ``model`` besides its id: ``(placement field, key
    field, by_id)``. The shard key of a keyed model (a plain column, or a foreign key to
    its co-located parent), placed by the model's own id field as a key; or a follower's
    link to its parent, whose id the parent's field places (``by_id``). None for a model
    whose rows nothing but their ids place."""
    field = sharded_pk(model)
    if field is not None:
        return (field, field.shard_key_field(), False) if field.shard_key else None
    link = parent_link(model)
    parent = sharded_pk(link.related_model) if link is not None else None
    return (parent, link, True) if parent is not None else None


def check_stored_key(instance: models.Model, using: str, value: Any = None) -> None:
    """Refuse to write a stored row whose shard key (or followed parent) names rows of
    another database than ``using``, where the row stays (``WrongShardError``, by the
    core's ``check_key_change``). ``value`` is the key's new value when known (an
    ``update()``); otherwise the row's own, unless deferred (then it is not written).
    A new row is placed by its key instead (``check_write``)."""
    if instance._state.adding:
        return
    link = key_link(type(instance))
    if link is None:
        return
    field, key, by_id = link
    if value is None:
        value = instance.__dict__.get(key.attname)  # a deferred key is not written
    if value is None or field.shard_map is None:
        return
    check_key_change(
        field.placement,
        value,
        using,
        what=type(instance).__name__,
        name=key.attname,
        by_id=by_id,
    )


def _pointer(instance: models.Model, model: type[models.Model]) -> Any:
    """The id ``instance`` holds in its one foreign key to ``model``, if it has one.

    Read from the instance's ``__dict__``: while ``Model.__init__`` assigns a related
    object the key's column is not set yet, and a deferred column must not be loaded
    (either would run a query for a row that may not exist).
    """
    keys = [
        f
        for f in instance._meta.concrete_fields
        if f.is_relation and f.related_model is not None and issubclass(model, f.related_model)
    ]
    return instance.__dict__.get(keys[0].attname) if len(keys) == 1 else None


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


def _writes_key(model: Any, update_fields: Any) -> bool:
    """Whether a save with these ``update_fields`` (None: every field) writes the key."""
    if update_fields is None:
        return True
    link = key_link(model)
    return link is not None and (link[1].name in update_fields or link[1].attname in update_fields)


def _lives_on_shards(model: Any) -> bool:
    return sharded_pk(model) is not None or parent_link(model) is not None


def check_write(instance: models.Model, using: str) -> None:
    """Refuse to store a row of a sharded model on a database its id does not name, or
    with a key inside its family that names a row of another database.

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
    check_family_keys(instance, using)


def _check_write_on_save(
    sender: type[models.Model],
    instance: models.Model,
    using: str,
    update_fields: Any = None,
    **kwargs: Any,
) -> None:
    if not off_shard_writes_allowed() and _writes_key(sender, update_fields):
        check_stored_key(instance, using)  # first: a stored row's new key is named as such
    check_write(instance, using)
    if _lives_on_shards(sender):
        check_transaction(sender, [using])


def _check_links_on_add(
    sender: Any,
    instance: models.Model,
    action: str,
    reverse: bool,
    model: Any,
    pk_set: set[Any] | None,
    using: str,
    **kwargs: Any,
) -> None:
    """``task.labels.add(label_id)`` writes link rows on the task's database: each row it
    names must live there. Django asks ``allow_relation`` for model instances only."""
    if action != "pre_add" or not pk_set or off_shard_writes_allowed():
        return
    target = sharded_pk(model)
    if target is None or parent_link(sender) is None:
        return
    for value in pk_set:
        families.check_family_key(
            target.placement,
            value,
            using,
            what=type(instance).__name__,
            key=_many_to_many_name(sender, reverse),
        )


def watch_writes(model: type[models.Model], *, lives_on_shards: bool | None = None) -> bool:
    """Connect the write checks (``pre_save``: ``check_write``, ``check_stored_key``,
    ``check_transaction``; ``m2m_changed``: the family's links, for a ``through`` table)
    to ``model``'s own signals when its rows live on shards (``lives_on_shards``: as
    the caller found, else asked here); True when it did. Called for every model when
    the app is ready, and for a model defined later (``class_prepared``): a model whose
    rows do not live on shards sends its signals to no receiver of uid_fields."""
    if lives_on_shards is None:
        lives_on_shards = _lives_on_shards(model)
    if not lives_on_shards:
        return False
    if _WRITE_CHECKS in model.__dict__:
        return True
    checks = _ModelWriteChecks()
    setattr(model, _WRITE_CHECKS, checks)  # the model holds its receivers: they go with it
    pre_save.connect(checks.on_save, sender=model, dispatch_uid="uid_fields.check_write")
    m2m_changed.connect(checks.on_links, sender=model, dispatch_uid="uid_fields.check_family_links")
    return True


#: The attribute of a model class that holds its ``_ModelWriteChecks``.
_WRITE_CHECKS = "_uid_fields_write_checks"


class _ModelWriteChecks:
    """The write-check receivers of one model, held by the model class and connected
    weakly. Django keys a receiver connected with ``sender=`` by ``id(sender)``: one that
    outlived its class (a model made in a test, ``isolate_apps``) would be called for
    the next class Python puts at the same address. Held by the class, it is collected
    with it, and Django drops it from the signal."""

    def on_save(self, sender: type[models.Model], **kwargs: Any) -> None:
        _check_write_on_save(sender, **kwargs)

    def on_links(self, sender: Any, **kwargs: Any) -> None:
        _check_links_on_add(sender, **kwargs)


def _many_to_many_name(through: Any, reverse: bool) -> str:
    """The name the relation goes by from the side that adds (``labels``, ``tasks``)."""
    source = through._meta.auto_created
    for field in source._meta.local_many_to_many if source else ():
        if field.remote_field.through is through:
            return str(field.remote_field.get_accessor_name() if reverse else field.name)
    return str(through._meta.model_name)


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


def refuses_unrouted(model: type[models.Model]) -> bool:
    """Whether a query of ``model``'s rows that names no shard is refused (strict
    routing, and no shard pinned for the model)."""
    return pinned_shard(model) is None and bool(conf.STRICT_ROUTING)


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
    link = parent_link(model)
    if link is not None:
        # A follower's own id names no shard: only its parent's id can.
        parent = link.related_model.__name__
        hidden = (link.remote_field.related_name or "").endswith("+")  # no reverse accessor
        reverse = None if hidden else link.remote_field.get_accessor_name()
        through = f"read them through it ({link.name}.{reverse}.all()), " if reverse else ""
        return ShardRoutingError(
            f"this {name} query names no shard: {name} rows live on their {parent}'s "
            f"database and their own ids name none, so filter by the {parent} "
            f"({link.name}=, {link.attname}=, {link.name}__in=), {through}pick one with "
            f".using(alias), or fan out with {name}.objects.on_all_shards()"
        )
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


def _placed_by(child: models.Model, parent: models.Model) -> bool:
    """Whether ``parent`` is of the model ``child``'s shard key (or link) points at."""
    link = placement_link(type(child))
    return link is not None and isinstance(parent, link.related_model)


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
        if instance is not None and colocated(model, type(instance)):
            return instance._state.db  # type: ignore[no-any-return]  # its parent, its family
        return _unhinted(model)

    def db_for_read(self, model: type[models.Model], **hints: Any) -> str | None:
        return self._route(model, hints)

    def db_for_write(self, model: type[models.Model], **hints: Any) -> str | None:
        # obj.delete() sends no signal before its transaction: its collector checks it
        # (deletion.ShardedCollector.delete, told by its origin, the row).
        return self._route(model, hints, write=True)

    def allow_relation(self, obj1: models.Model, obj2: models.Model, **hints: Any) -> bool | None:
        if not _lives_on_shards(type(obj1)) and not _lives_on_shards(type(obj2)):
            return None
        db1, db2 = obj1._state.db, obj2._state.db
        if db1 is None or db2 is None:
            return None
        primaries = replica_primaries()  # a row being read from a replica lives on its primary
        db1, db2 = primaries.get(db1, db1), primaries.get(db2, db2)
        for child, parent in ((obj1, obj2), (obj2, obj1)):
            if child._state.adding and colocated(type(child), type(parent)):
                return True  # an unsaved row follows its shard key when it is saved
            if _placed_by(child, parent):
                # A stored row re-pointed at a parent elsewhere is a key change: refused
                # where it is validated (a form's field error, a 400) and where it is
                # written (WrongShardError), not at assignment, where a form or a
                # serializer could only fail with a ValueError (a 500).
                return True
        if not colocated(type(obj1), type(obj2)):
            return True  # a soft reference across shards (no database constraint)
        return bool(db1 == db2)

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        """Where a model's table is created: a sharded model on its map's databases.

        Never raises: Django 6.1 asks the router from inside ``manage.py check`` (field
        checks pass every database), and a malformed ``UID_FIELDS`` must be reported there
        as checks E004/E014, not raised; with no opinion, ``migrate`` stops on those
        check errors before it migrates anything.
        """
        try:
            return self._allow_migrate(db, app_label, model_name, **hints)
        except ConfigurationError:
            return None

    def _allow_migrate(
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
