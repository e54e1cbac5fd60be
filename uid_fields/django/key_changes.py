"""A stored row's shard key (or the parent it lives with) may change only within its
database: Django's paths to the core's ``check_key_change``.

An UPDATE runs where the row is and leaves it there, so a new key whose rows live on
another database strands the row: ``filter(owner_id=new)``, a cascade from the new
parent and ``audit`` read the key's database and never find it. ``save()`` is checked
where every write is (``routing.check_stored_key``, in ``pre_save``); this module holds
the other paths:

- ``QuerySet.update(owner_id=...)`` and ``bulk_update(objs, ["owner_id"])``: the new
  keys against each database the UPDATE runs on (``refuse_key_moves``,
  ``check_bulk_keys``);
- validation: ``clean_fields()`` (what ``full_clean()``, ModelForms and the admin run)
  reports the change as an error on the key's field, installed on each model whose rows a
  key places, as ``unique.py`` installs its methods; DRF serializers ask
  ``key_change_message`` (``rest.KeyChangeValidator``), so a PATCH is a 400 naming the
  field rather than a 500.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.signals import class_prepared
from django.dispatch import receiver

from ..errors import ShardKeyError, WrongShardError
from ..placement import check_key_change
from .fields import UidField
from .routing import check_stored_key, key_link

__all__ = [
    "check_bulk_keys",
    "clean_fields",
    "key_change_message",
    "key_value",
    "new_keys_in",
    "refuse_key_moves",
]


def key_value(key: Any, value: Any) -> Any:
    """The raw key a value of the key field stands for (a related row's id for a row)."""
    if isinstance(value, models.Model):
        return value.pk
    return key.to_python(value)


def new_keys_in(model: Any, kwargs: Mapping[str, Any]) -> list[Any]:
    """The keys an ``update(**kwargs)`` sets ``model``'s shard key (or followed parent) to.

    A key set to an SQL expression (``F("owner_id") + 1``) cannot be known before it
    runs and is not returned, as a new id set so is not (``new_objects.new_ids_in``).
    """
    link = key_link(model)
    if link is None:
        return []
    key = link[1]
    names = (key.name, key.attname)
    return [
        key_value(key, value)
        for name, value in kwargs.items()
        if name in names and value is not None and not hasattr(value, "resolve_expression")
    ]


def refuse_key_moves(model: Any, new_keys: Iterable[Any], aliases: Iterable[str]) -> None:
    """Refuse an UPDATE that would give rows on ``aliases`` a key whose rows live on
    another database: they stay where they are, where no read by that key looks."""
    link = key_link(model)
    if link is None:
        return
    field, key, by_id = link
    databases = tuple(aliases)
    for value in new_keys:
        for alias in databases:
            check_key_change(
                field.placement,
                value,
                alias,
                what=model.__name__,
                name=key.attname,
                by_id=by_id,
            )


def check_bulk_keys(objs: Iterable[tuple[str, models.Model]], fields: Iterable[str]) -> None:
    """``bulk_update(objs, fields)``: when ``fields`` writes the key, each row's key
    against the database its UPDATE runs on (``(alias, obj)`` pairs), all before any is
    written."""
    pairs = list(objs)
    if not pairs:
        return
    link = key_link(type(pairs[0][1]))
    if link is None or not {link[1].name, link[1].attname} & set(fields):
        return
    for alias, obj in pairs:
        check_stored_key(obj, alias)


def key_change_message(instance: models.Model, value: Any = None) -> str | None:
    """Why ``instance`` (a stored row) may not take the key it holds, or ``value`` for
    its key: the form and API error, None when the key keeps it on its database (or
    the row is new, not on shards, or the value names no shard: the field's own
    validation says so)."""
    database = instance._state.db
    if instance._state.adding or database is None:
        return None
    link = key_link(type(instance))
    if link is None:
        return None
    key = link[1]
    try:
        check_stored_key(instance, database, None if value is None else key_value(key, value))
    except WrongShardError as error:
        return (
            f"{key.verbose_name} {value if value is not None else getattr(instance, key.attname)}"
            f" has its rows on another shard ({error.expected}) than this "
            f"{type(instance)._meta.verbose_name} ({database}): a stored row cannot change "
            "shards. Create it anew there and delete this one."
        )
    except (ShardKeyError, TypeError, ValueError, ValidationError):
        return None  # not a key: the field's own validation reports it
    return None


def clean_fields(instance: models.Model, exclude: Any = None) -> None:
    """``Model.clean_fields``, with a key change to another database reported on the key's
    field (``full_clean()``, ModelForms, the admin) instead of failing at ``save()``."""
    errors: dict[str, Any] = {}
    link = key_link(type(instance))
    if link is not None and (exclude is None or link[1].name not in exclude):
        message = key_change_message(instance)
        if message is not None:
            errors[link[1].name] = [ValidationError(message, code="other_shard")]
            exclude = {*(exclude or ()), link[1].name}  # one error: this one
    try:
        models.Model.clean_fields(instance, exclude=exclude)
    except ValidationError as error:
        errors = error.update_error_dict(errors)
    if errors:
        raise ValidationError(errors)


@receiver(class_prepared, dispatch_uid="uid_fields.key_changes.install")
def _install(sender: type[models.Model], **kwargs: Any) -> None:
    """Give a model with a uid primary key the key-aware ``clean_fields``, unless the
    model (or a base) overrides Django's: an override of your own can call
    ``uid_fields.django.key_changes.clean_fields(self, exclude)``. Models that turn out
    not to be placed by a key get Django's behaviour from it."""
    meta = sender._meta
    if meta.abstract or not isinstance(meta.pk, UidField):
        return
    if sender.clean_fields is models.Model.clean_fields:
        sender.clean_fields = clean_fields  # type: ignore[method-assign, assignment]
