"""Uniqueness of rows on shards, in Django's terms.

Each shard's unique index sees that shard's rows only. The core decides which unique
sets the databases enforce (``uid_fields.placement.uniqueness``); here a model's sets
are read from ``_meta`` (``unique=True``, ``unique_for_date``, ``unique_together``,
``UniqueConstraint``) and Django's validation is made to read every shard a set can
span:

- ``validate_unique()`` (and DRF's ``UniqueValidator``/``UniqueTogetherValidator``)
  filter the default manager by the exact values of one whole unique set: the sharded
  queryset routes such a lookup to every database its rows can be on
  (``unique_lookup_databases``), one when the set includes the shard key or the id.
  What names no shard even so (a follower model's primary key) reads every shard
  while the model's ``validate_unique()`` runs;
- ``validate_constraints()`` runs each ``UniqueConstraint`` with ``using=`` the row's
  database: here the constraints the databases cannot enforce run on every shard.

Both methods are installed on each model with a uid primary key when its class is
prepared, unless the model (or a base) overrides them itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models, router
from django.db.models import F, UniqueConstraint
from django.db.models.signals import class_prepared
from django.dispatch import receiver

from ..errors import ShardKeyError
from ..placement.uniqueness import UniqueSet, databases_to_check, named_unique_set
from .connections.replicas import read_from_primary
from .fields import UidField
from .routing import parent_link, sharded_pk

__all__ = [
    "all_unique_sets",
    "model_databases",
    "placing_fields",
    "unique_lookup_databases",
    "validate_constraints",
    "validate_unique",
    "validating_unique",
]


@dataclass(frozen=True)
class _Described:
    """What a model declares about uniqueness, read once per model class."""

    lookup_sets: tuple[UniqueSet, ...]  # the sets a filter by field values can name
    expression_sets: tuple[UniqueSet, ...]  # UniqueConstraint(Lower("slug")), by field
    names: Mapping[str, str]  # name, attname and "pk" -> field name
    placing: frozenset[str]


def model_databases(model: Any) -> tuple[str, ...]:
    """Every database rows of ``model`` live on (empty for a model not on shards)."""
    field = sharded_pk(model)
    if field is None:
        link = parent_link(model)
        field = sharded_pk(link.related_model) if link is not None else None
    return field.placement.databases if field is not None else ()


def placing_fields(model: Any) -> frozenset[str]:
    """The fields whose values place a row: its id, its shard key, the key to the parent
    it follows. A unique set with one of them is held by one database."""
    return _describe(model).placing


def all_unique_sets(model: Any) -> tuple[UniqueSet, ...]:
    """Every unique set ``model`` declares, its primary key aside."""
    described = _describe(model)
    return (*described.lookup_sets, *described.expression_sets)


#: Per model class, weakly: migrations build historical model classes by the hundred.
_described: WeakKeyDictionary[Any, _Described] = WeakKeyDictionary()


def _describe(model: Any) -> _Described:
    found = _described.get(model)
    if found is None:
        found = _described[model] = _read(model)
    return found


def _read(model: Any) -> _Described:
    meta = model._meta
    names: dict[str, str] = {"pk": meta.pk.name}
    for field in meta.concrete_fields:
        names[field.name] = names[field.attname] = field.name
    lookup_sets: list[UniqueSet] = []
    for field in meta.concrete_fields:
        if field.unique and not field.primary_key:
            lookup_sets.append(UniqueSet((field.name,), "unique=True"))
        for kind in ("date", "month", "year"):
            date = getattr(field, f"unique_for_{kind}", None)
            if date:
                lookup_sets.append(
                    UniqueSet((field.name,), f"unique_for_{kind}", date_field=_name(meta, date))
                )
    for together in meta.unique_together:
        fields = tuple(_name(meta, name) for name in together)
        lookup_sets.append(UniqueSet(fields, "unique_together"))
    expression_sets: list[UniqueSet] = []
    for constraint in meta.constraints:
        if not isinstance(constraint, UniqueConstraint):
            continue
        label = f"constraint {constraint.name!r}"
        if constraint.fields:
            fields = tuple(_name(meta, name) for name in constraint.fields)
            lookup_sets.append(UniqueSet(fields, label))
        else:
            referenced = _referenced(meta, constraint.expressions)
            if referenced:
                expression_sets.append(UniqueSet(referenced, label))
    pk = meta.pk
    placing = {pk.name}
    field = sharded_pk(model)
    if field is not None and field.shard_key:
        placing.add(field.shard_key_field().name)
    link = parent_link(model) if field is None else None
    if link is not None:
        placing.add(link.name)
    return _Described(tuple(lookup_sets), tuple(expression_sets), names, frozenset(placing))


def _name(meta: Any, name: str) -> str:
    try:
        return str(meta.get_field(name).name)
    except FieldDoesNotExist:
        return name  # Django's own checks report it


def _referenced(meta: Any, expressions: Iterable[Any]) -> tuple[str, ...]:
    """The fields a constraint's expressions read (``Lower("slug")`` reads ``slug``)."""
    found: dict[str, None] = {}
    for expression in expressions:
        parts = expression.flatten() if hasattr(expression, "flatten") else [expression]
        for part in parts:
            name = getattr(part, "name", None) if isinstance(part, F) else None
            if isinstance(name, str):
                found[_name(meta, name.split("__", 1)[0])] = None
    return tuple(found)


# -- lookups -----------------------------------------------------------------------------


def unique_lookup_databases(model: Any, kwargs: Mapping[str, Any]) -> set[str] | None:
    """The databases a filter by the exact values of one whole unique set must read:
    every database of the model (such a filter names no shard by itself, and matches
    at most one row per database). None for any other filter.

    A set that includes the shard key or the id is routed by that key before this is
    asked; this is how ``validate_unique()`` and DRF's validators read every shard.
    """
    described = _describe(model)
    if not described.lookup_sets:
        return None
    lookups: dict[str, set[str]] = {}
    for key in kwargs:
        base, _, rest = key.partition("__")
        name = described.names.get(base)
        if name is None or "__" in rest:
            continue
        lookups.setdefault(name, set()).add(rest or "exact")
    if named_unique_set(lookups, described.lookup_sets) is None:
        return None
    return set(model_databases(model))


# -- validate_unique ---------------------------------------------------------------------

_validating: ContextVar[frozenset[Any]] = ContextVar("uid_validating_unique", default=frozenset())


def validating_unique(model: Any) -> bool:
    """Whether ``validate_unique()`` of a ``model`` row is running in this context."""
    return model in _validating.get()


def validate_unique(instance: models.Model, exclude: Any = None) -> None:
    """``Model.validate_unique``, reading every shard a check can span.

    Django looks each unique set up with ``_default_manager.filter(...)``. A whole
    unique set is routed by ``unique_lookup_databases``; what is left names no shard by
    itself, such as the primary key of a follower model (its ids name no shard): while
    this runs, such a lookup of this model reads every shard instead of being refused.
    """
    token = _validating.set(_validating.get() | {type(instance)})
    try:
        models.Model.validate_unique(instance, exclude=exclude)
    finally:
        _validating.reset(token)


# -- validate_constraints ----------------------------------------------------------------


def validate_constraints(instance: models.Model, exclude: Any = None) -> None:
    """``Model.validate_constraints``, with every ``UniqueConstraint`` read on each
    database a colliding row can be on.

    Django runs each constraint's ``validate(..., using=<the row's database>)``: right
    for a constraint that includes the shard key or the id, and blind to the other
    shards for any other. Each constraint is still Django's ``validate()`` (the row
    itself excluded by its pk, a NULL conflicting with nothing), run per database; the
    reads go to the primaries. Errors are gathered as Django gathers them.
    """
    model = type(instance)
    databases = model_databases(model)
    if len(databases) <= 1:
        models.Model.validate_constraints(instance, exclude=exclude)
        return
    using = router.db_for_write(model, instance=instance)
    errors: dict[str, Any] = {}
    with read_from_primary():
        for model_class, constraints in instance.get_constraints():
            for constraint in constraints:
                aliases: tuple[str, ...] = (using,)
                if isinstance(constraint, UniqueConstraint):
                    aliases = _constraint_databases(instance, constraint, databases, using)
                try:
                    for alias in aliases:
                        constraint.validate(model_class, instance, exclude=exclude, using=alias)
                except ValidationError as error:
                    fields: tuple[str, ...] = tuple(getattr(constraint, "fields", ()))
                    if getattr(error, "code", None) == "unique" and len(fields) == 1:
                        errors.setdefault(fields[0], []).append(error)
                    else:
                        errors = error.update_error_dict(errors)
    if errors:
        raise ValidationError(errors)


def _constraint_databases(
    instance: models.Model, constraint: UniqueConstraint, databases: tuple[str, ...], using: str
) -> tuple[str, ...]:
    meta = type(instance)._meta
    names = (
        tuple(_name(meta, name) for name in constraint.fields)
        if constraint.fields
        else _referenced(meta, constraint.expressions)
    )
    key_databases = _key_databases(instance, names, using)
    return databases_to_check(names, placing_fields(type(instance)), databases, key_databases)


def _key_databases(instance: models.Model, names: tuple[str, ...], using: str) -> tuple[str, ...]:
    """The databases rows sharing this row's shard key can be on: its own, and the one
    its key named before that database was closed to new keys."""
    field = sharded_pk(type(instance))
    if field is None or not field.shard_key or field.shard_key_field().name not in names:
        return (using,)
    try:
        found = field.databases_for_key(field.shard_key_value(instance))
    except (ShardKeyError, TypeError, ValueError):
        return (using,)
    return found or (using,)


@receiver(class_prepared, dispatch_uid="uid_fields.unique.install")
def _install(sender: type[models.Model], **kwargs: Any) -> None:
    """Give a model with a uid primary key the shard-aware ``validate_unique`` and
    ``validate_constraints``.

    Only where neither the model nor a base overrides Django's method: an override of
    your own can call ``uid_fields.django.unique.validate_unique(self, exclude)`` (or
    ``validate_constraints``). Models that turn out not to live on shards get Django's
    behaviour from them.
    """
    meta = sender._meta
    if meta.abstract or not isinstance(meta.pk, UidField):
        return
    if sender.validate_unique is models.Model.validate_unique:
        sender.validate_unique = validate_unique  # type: ignore[method-assign, assignment]
    if sender.validate_constraints is models.Model.validate_constraints:
        sender.validate_constraints = validate_constraints  # type: ignore[method-assign, assignment]
