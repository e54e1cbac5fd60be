"""A generic foreign key that may point at rows on shards.

Django's ``GenericForeignKey`` reads content types on the database of the row it is
given (``ContentType.objects.db_manager(obj._state.db)``) and the target on the holding
row's database. With the target on a shard, assigning it reads ``django_content_type``
on the shard, where there is none, and reading it asks ``default`` for a sharded row.

This one is a drop-in for it (``from uid_fields.django.generic import
GenericForeignKey``): content types are read where Django's routers put
``ContentType`` (``default``) whenever the database at hand is a shard, and the target
is read where its id names (a follower, whose own id names no shard, is looked for on
every shard). Between ordinary models it behaves exactly as Django's.

It needs ``django.contrib.contenttypes`` in ``INSTALLED_APPS``, so it is not imported by
``uid_fields.django``. A ``GenericRelation`` on a model on shards is still refused
(``uid_fields.E019``): deleting a row would collect its generic children on its shard.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, ClassVar

from django.contrib.contenttypes.fields import GenericForeignKey as DjangoGenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import models, router

from . import compat
from .conf import shard_databases
from .query.query import ShardedQuerySet
from .routing import parent_link, placing_field

__all__ = ["GenericForeignKey"]


def _content_types(alias: str | None) -> Any:
    """``ContentType``'s manager on the database to read content types from: ``alias``,
    as Django reads them, unless it is a shard, which holds none."""
    if alias is not None and alias in shard_databases():
        alias = router.db_for_read(ContentType)
    return ContentType.objects.db_manager(alias)


def _routed(model: type[models.Model]) -> ShardedQuerySet[Any]:
    """Every row of ``model`` (a model on shards), routed by id; a follower's own id
    names no shard, so its rows are looked for on every shard of its parent's map."""
    rows: ShardedQuerySet[Any] = ShardedQuerySet(model=model)
    return rows.on_all_shards() if parent_link(model) is not None else rows


def _ids(model: type[models.Model], values: Iterable[Any]) -> list[Any]:
    """``values`` as ids of ``model``; a malformed one matches no row, so it is left out."""
    pk = model._meta.pk
    assert pk is not None
    ids = []
    for value in values:
        try:
            ids.append(pk.to_python(value))
        except (ValidationError, TypeError, ValueError):
            continue
    return ids


class GenericForeignKey(DjangoGenericForeignKey):
    """Django's ``GenericForeignKey``, with targets and holders that may live on shards."""

    #: Read by the system checks: this key does not read content types on a shard.
    uid_fields_routed: ClassVar[bool] = True

    def get_content_type(
        self,
        obj: models.Model | None = None,
        id: int | None = None,
        using: str | None = None,
        model: type[models.Model] | None = None,
    ) -> ContentType:
        if obj is not None:
            return _content_types(obj._state.db).get_for_model(  # type: ignore[no-any-return]
                obj, for_concrete_model=self.for_concrete_model
            )
        if id is not None:
            return _content_types(using).get_for_id(id)  # type: ignore[no-any-return]
        if model is not None:
            return _content_types(using).get_for_model(  # type: ignore[no-any-return]
                model, for_concrete_model=self.for_concrete_model
            )
        raise ValueError("get_content_type() needs obj, id or model")

    def target_of(self, model: type[models.Model] | None, value: Any, holder: Any) -> Any:
        """The row of ``model`` whose id is ``value`` (None when there is none): from the
        shard its id names, or, for an ordinary model, where Django would read it."""
        if model is None:
            return None  # a content type whose model is gone
        try:
            if placing_field(model) is None:
                alias = holder._state.db
                if alias in shard_databases():  # a holder on a shard: not where it is
                    alias = router.db_for_read(model, instance=holder)
                return model._base_manager.using(alias).get(pk=value)
            ids = _ids(model, [value])
            return _routed(model).get(pk=ids[0]) if ids else None
        except ObjectDoesNotExist:
            return None

    def contribute_to_class(  # type: ignore[override]
        self, cls: type[models.Model], name: str, **kwargs: Any
    ) -> None:
        """As Django's, then this field is the attribute's descriptor itself (Django 6.1
        installs a descriptor class of its own, which would read the target on the
        row's database, a shard that holds no content types)."""
        super().contribute_to_class(cls, name, **kwargs)
        setattr(cls, self.name, self)

    def __set__(self, instance: Any, value: Any) -> None:
        compat.assign_generic_target(self, instance, value)

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        """As Django's, with the target read by ``target_of``."""
        if instance is None:
            return self
        ct_attname = self.model._meta.get_field(self.ct_field).attname
        ct_id = getattr(instance, ct_attname, None)
        pk_val = getattr(instance, self.fk_field)
        rel_obj = self.get_cached_value(instance, default=None)
        if rel_obj is None and self.is_cached(instance):
            return rel_obj
        if rel_obj is not None:
            ct_match = ct_id == self.get_content_type(obj=rel_obj, using=instance._state.db).id
            if ct_match and rel_obj._meta.pk.to_python(pk_val) == rel_obj.pk:
                return rel_obj
            rel_obj = None
        if ct_id is not None:
            ct = self.get_content_type(id=ct_id, using=instance._state.db)
            rel_obj = self.target_of(ct.model_class(), pk_val, instance)
        self.set_cached_value(instance, rel_obj)
        return rel_obj

    def get_prefetch_querysets(
        self, instances: list[Any], querysets: list[Any] | None = None
    ) -> tuple[Any, ...]:
        """As Django's: one query per model (per shard for rows on shards)."""
        ct_attname = self.model._meta.get_field(self.ct_field).attname
        custom: dict[int, Any] = {}
        for queryset in querysets or ():
            model = queryset.query.model
            using = None if placing_field(model) is not None else queryset.db
            ct_id = self.get_content_type(model=model, using=using).pk
            if ct_id in custom:
                raise ValueError("Only one queryset is allowed for each content type.")
            custom[ct_id] = queryset
        wanted: dict[int, set[Any]] = defaultdict(set)
        holders: dict[int, Any] = {}  # one holder per content type, for its database
        for instance in instances:
            ct_id = getattr(instance, ct_attname)
            value = getattr(instance, self.fk_field) if ct_id is not None else None
            if value is not None:
                wanted[ct_id].add(value)
                holders[ct_id] = instance
        found: list[Any] = []
        for ct_id, values in wanted.items():
            holder = holders[ct_id]
            model = self.get_content_type(id=ct_id, using=holder._state.db).model_class()
            if model is None:
                continue  # a content type whose model is gone
            if ct_id in custom:
                found.extend(custom[ct_id].filter(pk__in=_ids(model, values)))
            elif placing_field(model) is not None:
                found.extend(_routed(model).filter(pk__in=_ids(model, values)))
            else:
                alias = holder._state.db
                if alias in shard_databases():
                    alias = router.db_for_read(model, instance=holder)
                found.extend(model._base_manager.using(alias).filter(pk__in=values))

        def gfk_key(obj: Any) -> Any:
            ct_id = getattr(obj, ct_attname)
            if ct_id is None:
                return None
            model = self.get_content_type(id=ct_id, using=obj._state.db).model_class()
            if model is None:
                return None
            try:
                return (model._meta.pk.to_python(getattr(obj, self.fk_field)), model)
            except (ValidationError, TypeError, ValueError):
                return None  # a malformed id: no row has it

        return (found, lambda obj: (obj.pk, obj.__class__), gfk_key, True, self.name, False)

    def get_prefetch_queryset(self, instances: list[Any], queryset: Any = None) -> tuple[Any, ...]:
        """Django 4.2's name of ``get_prefetch_querysets``."""
        return self.get_prefetch_querysets(instances, None if queryset is None else [queryset])
