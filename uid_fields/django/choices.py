"""Choice lists of rows on shards: every shard's rows, whoever builds the list.

A select box of a key to a sharded model is built from the model's default manager,
by whatever builds the form: ``ForeignKey.formfield()`` asks ``using(None)`` (a fan-out,
see ``ShardedQuerySet.using``), but django-filter's generated ``ModelChoiceFilter``
passes ``_default_manager.complex_filter(...)``, DRF's related fields
``_default_manager.all()``, and a form of your own ``Customer.objects.all()``. Such a
query names no shard, and strict routing refuses it, which made the browsable API and
every filter form a 500.

Every choice list is read by one of a few consumers: Django's ``ModelChoiceIterator``
(``ModelChoiceField``, ``ModelMultipleChoiceField``, and every subclass: the admin's,
django-filter's), a model field's ``get_choices()`` (the admin's list filters of a
related field) and DRF's ``RelatedField.get_choices()`` (the browsable API). A sharded
query that names no shard asks ``building_choices()`` just before it would be refused;
while one of those consumers is reading it, the query fans out to every shard instead. The same
query anywhere else is refused as before. Only that refusal path looks at the stack,
so routed queries pay nothing.
"""

from __future__ import annotations

import sys
from types import CodeType, FrameType

from django.db.models import Field
from django.db.models.fields.reverse_related import ForeignObjectRel
from django.forms.models import ModelChoiceIterator

__all__ = ["building_choices", "choice_consumers"]

#: How far up the stack a consumer is looked for: a few frames separate it from the
#: queryset (QuerySet.__iter__, a comprehension, a subclass's ``super()`` call).
DEPTH = 16

_DJANGO: frozenset[CodeType] = frozenset(
    method.__code__
    for method in (
        ModelChoiceIterator.__iter__,
        ModelChoiceIterator.__len__,
        ModelChoiceIterator.__bool__,
        Field.get_choices,  # the admin's RelatedFieldListFilter
        ForeignObjectRel.get_choices,  # ... of a reverse relation
    )
)


def choice_consumers() -> frozenset[CodeType]:
    """The code of every method that reads a queryset to list choices.

    DRF's is added once ``rest_framework.relations`` has been imported by someone
    (nothing here imports DRF, an optional dependency).
    """
    relations = sys.modules.get("rest_framework.relations")
    related = getattr(relations, "RelatedField", None)
    get_choices = getattr(related, "get_choices", None)
    code = getattr(get_choices, "__code__", None)
    return _DJANGO | {code} if isinstance(code, CodeType) else _DJANGO


def building_choices() -> bool:
    """Whether the caller runs inside a choice list's reading of a queryset."""
    consumers = choice_consumers()
    frame: FrameType | None = sys._getframe(1)
    for _ in range(DEPTH):
        if frame is None:
            return False
        if frame.f_code in consumers:
            return True
        frame = frame.f_back
    return False
