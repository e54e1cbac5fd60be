"""Choice lists of rows on shards: every shard's rows, asked for explicitly.

A select box of a key to a sharded model is built from the model's default manager,
by whatever builds the form: ``ForeignKey.formfield()`` asks ``using(None)`` (a fan-out,
see ``ShardedQuerySet.using``), django-filter's generated ``ModelChoiceFilter`` passes
``_default_manager.complex_filter(field.get_limit_choices_to())``, DRF's related fields
``_default_manager.filter(field.get_limit_choices_to())``, the admin's list filters
``Field.get_choices()`` (the same ``complex_filter``). Such a query names no shard, and
strict routing refuses it, which made the browsable API and every filter form a 500.

Nothing here looks at who is calling. A query lists every shard's rows when it says so:

* ``ShardedQuerySet.for_choices()`` (a flag the query's copies keep): the query, when it
  names no shard, reads every shard instead of being refused;
* ``EveryShard``, a ``Q`` that filters by what it wraps and sets that flag on the sharded
  query it filters. When the app is ready, each relation to a model whose rows live on
  shards answers ``get_limit_choices_to()`` with one (wrapping its own
  ``limit_choices_to``), and each reverse relation of such a model passes one to
  ``get_choices()``: the consumers above read those extension points;
* ``ShardedModelChoiceIterator`` (``ModelChoiceField.iterator``) lists its field's
  queryset with the flag, and ``ShardedModelChoiceField`` and
  ``ShardedModelMultipleChoiceField`` use it: a form field of your own over
  ``Customer.objects.all()``. A subclass of the iterator behaves as it does, whatever it
  overrides, since the flag is on the queryset it reads.

The same query anywhere else (``list(field.queryset)``, ``Customer.objects.count()``) is
refused as before.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django import forms
from django.db import models
from django.forms.models import ModelChoiceIterator

__all__ = [
    "EveryShard",
    "ShardedModelChoiceField",
    "ShardedModelChoiceIterator",
    "ShardedModelMultipleChoiceField",
    "every_shard",
    "for_choices",
    "install_choice_hooks",
]


if TYPE_CHECKING:  # generic in django-stubs only
    _Iterator = ModelChoiceIterator[Any]
    _Field = forms.ModelChoiceField[Any]
    _MultipleField = forms.ModelMultipleChoiceField[Any]
else:
    _Iterator = ModelChoiceIterator
    _Field = forms.ModelChoiceField
    _MultipleField = forms.ModelMultipleChoiceField


class EveryShard(models.Q):
    """``limit_choices_to`` that also says: the choices come from every shard.

    Filters by the conditions it wraps (none: every row); a ``ShardedQuerySet`` that
    ``filter()`` or ``complex_filter()`` is given one is flagged ``for_choices()``. It
    is true even when it wraps nothing, as DRF applies ``limit_choices_to`` only when it
    is.
    """

    def __bool__(self) -> bool:
        return True

    def conditions(self) -> models.Q | None:
        """What it filters by, as a plain ``Q`` (None: nothing)."""
        if not self.children:
            return None
        plain = models.Q(*self.children, _connector=self.connector, _negated=self.negated)
        return plain


def every_shard(limit_choices_to: Any = None) -> EveryShard:
    """``limit_choices_to`` (a dict, a ``Q`` or nothing) as an ``EveryShard``."""
    if isinstance(limit_choices_to, EveryShard):
        return limit_choices_to
    if not limit_choices_to:
        return EveryShard()
    if isinstance(limit_choices_to, models.Q):
        return EveryShard(limit_choices_to)
    return EveryShard(**dict(limit_choices_to))


def for_choices(queryset: Any) -> Any:
    """``queryset`` flagged to list every shard's rows when it names no shard (a
    ``ShardedQuerySet``); any other queryset as it is."""
    flag = getattr(queryset, "for_choices", None)
    return flag() if callable(flag) else queryset


class ShardedModelChoiceIterator(_Iterator):
    """Django's ``ModelChoiceIterator``, reading its field's queryset flagged with
    ``for_choices()``: a select box of rows on every shard."""

    def __init__(self, field: Any) -> None:
        super().__init__(field)
        self.queryset = for_choices(self.queryset)


class ShardedModelChoiceField(_Field):
    """A ``ModelChoiceField`` whose choices come from every shard
    (``ShardedModelChoiceIterator``); ``clean()`` reads the chosen row where it lives."""

    iterator = ShardedModelChoiceIterator


class ShardedModelMultipleChoiceField(_MultipleField):
    """A ``ModelMultipleChoiceField`` whose choices come from every shard."""

    iterator = ShardedModelChoiceIterator


def _limit_to_every_shard(field: Any) -> None:
    original = field.get_limit_choices_to

    @functools.wraps(original)
    def get_limit_choices_to() -> EveryShard:
        return every_shard(original())

    field.get_limit_choices_to = get_limit_choices_to


def _reverse_choices_from_every_shard(rel: Any) -> None:
    original = rel.get_choices

    @functools.wraps(original)
    def get_choices(*args: Any, limit_choices_to: Any = None, **kwargs: Any) -> Any:
        return original(
            *args, limit_choices_to=every_shard(limit_choices_to or rel.limit_choices_to), **kwargs
        )

    rel.get_choices = get_choices


def install_choice_hooks(model: type[models.Model], lives_on_shards: Any) -> None:
    """Give ``model``'s relations that list rows living on shards (``lives_on_shards``
    says which models' do) the ``EveryShard`` hooks: a forward key to such a model its
    ``get_limit_choices_to()``, a reverse relation from such a model its
    ``get_choices()``. On the field objects of those relations only; called for every
    model when the app is ready."""
    for field in model._meta.get_fields(include_hidden=True):
        target: Any = field.related_model
        if not field.is_relation or target is None or isinstance(target, str):
            continue
        if not lives_on_shards(target):
            continue
        if field.auto_created and not field.concrete:  # a reverse relation (rel)
            if "get_choices" not in vars(field) and hasattr(field, "limit_choices_to"):
                _reverse_choices_from_every_shard(field)
        elif hasattr(field, "get_limit_choices_to") and "get_limit_choices_to" not in vars(field):
            _limit_to_every_shard(field)
