"""Django REST framework support: 64-bit ids as JSON strings, accepted as strings or ints.

JavaScript numbers are exact only up to 2**53 - 1, which every snowflake passes within
weeks of its epoch. Serializers built on ``UidModelSerializer`` (or ``UidSerializerMixin``
over any ``ModelSerializer``) render these ids, and primary keys that point at them, as
strings. Nothing changes DRF by itself: only ``UID_FIELDS["DRF_STRING_IDS"] = True`` (off by
default) makes every plain ``ModelSerializer`` of the process do the same, via ``install()``.

Keyset pages: ``KeysetPagination`` pages by id (``?after=<id>``), each shard returning
one page's rows whatever the depth, where DRF's page numbers make each return every row
before the page (``uid_fields.django.web.rest_pages``).

Public ids: with ``Meta.public_ids = True`` a ``UidModelSerializer`` shows and reads the
tokens of fields with a ``public_prefix`` (``PublicIdField``, ``PublicIdRelatedField``)
instead of the ids, and ``PublicIdLookupMixin`` finds a viewset's object by its token.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import FieldError
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.http import Http404
from django.shortcuts import get_object_or_404

from .._internal.extras import missing

try:
    import rest_framework  # noqa: F401
except ModuleNotFoundError as exc:  # name the extra, not just the module
    raise missing("rest_framework", exc) from exc

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.model_meta import RelationInfo

from ..errors import PublicIdError
from .columns.lookups import _aware
from .columns.public_ids import decode_token, kind_of, shows_public_ids
from .compat import explicit_database
from .fields import ShardedBigIntField, SnowflakeField, UidField
from .key_changes import key_change_message
from .routing import key_link
from .unique import model_databases
from .web.rest_pages import KeysetPagination

__all__ = [
    "IdStringField",
    "IdTimeFilter",
    "KeyChangeValidator",
    "KeysetPagination",
    "PublicIdField",
    "PublicIdLookupMixin",
    "PublicIdRelatedField",
    "PublicIdSerializerMixin",
    "ShardedConditionValidator",
    "StringPrimaryKeyRelatedField",
    "UidJSONEncoder",
    "UidJSONRenderer",
    "UidModelSerializer",
    "UidSerializerMixin",
    "dumps",
    "install",
]

JS_MAX_SAFE_INTEGER = 2**53 - 1


class IdStringField(serializers.IntegerField):
    """An integer id rendered as a string; input may be a string of digits or an int."""

    default_error_messages = {"invalid": "A valid id (a string of digits) is required."}

    def __init__(self, **kwargs: Any) -> None:
        self.model_field: UidField | None = kwargs.pop("model_field", None)
        super().__init__(**kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data == "" and self.allow_null:
            return True, None  # an empty form value of a nullable id is NULL, not an id
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            self.fail("invalid")
        try:
            if self.model_field is not None:
                value = self.model_field.to_python(data)
            else:
                text = str(data).strip()
                if not (text.isascii() and text.isdigit()):
                    raise ValueError(text)
                value = int(text)
        except (DjangoValidationError, ValueError):
            self.fail("invalid")
        self.run_validators(value)
        return value  # type: ignore[no-any-return]

    def to_representation(self, value: Any) -> str:  # type: ignore[override]
        return str(int(value))


class StringPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):  # type: ignore[type-arg]
    """Renders the key of a related object as a string when that key is a uid id."""

    def to_representation(self, value: Any) -> Any:
        pk = super().to_representation(value)
        queryset: Any = getattr(self, "queryset", None)
        model = getattr(queryset, "model", None) or getattr(value, "__class__", None)
        meta = getattr(model, "_meta", None)
        if isinstance(pk, int) and isinstance(getattr(meta, "pk", None), UidField):
            return str(pk)
        return pk

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool):
            self.fail("incorrect_type", data_type=type(data).__name__)
        return super().to_internal_value(data)

    def get_queryset(self) -> Any:
        """Choices of rows on shards come from every shard (the browsable API lists them);
        a lookup by id still reads one shard."""
        queryset = super().get_queryset()
        fan_out = getattr(queryset, "on_all_shards", None)  # a ShardedQuerySet's
        if fan_out is not None and explicit_database(cast(Any, queryset)) is None:
            try:
                return fan_out()
            except TypeError:  # a ShardedQuerySet of a model that is not sharded
                return queryset
        return queryset


def _js_safe(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > JS_MAX_SAFE_INTEGER else value
    if isinstance(value, dict):
        return {k: _js_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_js_safe(v) for v in value]
    return value


class UidJSONEncoder(DjangoJSONEncoder):
    """Writes integers beyond JavaScript's 2**53 - 1 as strings; others unchanged."""

    def encode(self, o: Any) -> str:
        return super().encode(_js_safe(o))

    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        return super().iterencode(_js_safe(o), _one_shot)


class UidJSONRenderer(JSONRenderer):
    """DRF's JSON renderer with ``UidJSONEncoder``: decoded parts and ids render as JSON
    (64-bit ids as strings where the serializer says so); set it in
    ``REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"]``."""

    encoder_class = UidJSONEncoder


class IdTimeFilter(BaseFilterBackend):
    """``?created_after=<ISO>&created_before=<ISO>`` read from the id (``id__time``)."""

    after_param = "created_after"
    before_param = "created_before"

    def filter_queryset(self, request: Any, queryset: Any, view: Any) -> Any:
        pk = queryset.model._meta.pk
        if not isinstance(pk, (SnowflakeField, ShardedBigIntField)):
            return queryset
        for param, lookup in ((self.after_param, "gte"), (self.before_param, "lt")):
            raw = request.query_params.get(param)
            if raw is None:
                continue
            try:
                when = _aware(raw)
            except (DjangoValidationError, TypeError, ValueError):
                raise ValidationError({param: "Enter an ISO 8601 date/time."}) from None
            queryset = queryset.filter(**{f"{pk.name}__time__{lookup}": when})
        return queryset


_STRING_ID_FIELDS = (SnowflakeField, ShardedBigIntField)
# What DRF maps these model fields to by itself (BigIntegerField exists from DRF 3.16 on).
_DRF_INTEGER_FIELDS: tuple[type[serializers.Field[Any, Any, Any, Any]], ...] = tuple(
    cls
    for cls in (serializers.IntegerField, getattr(serializers, "BigIntegerField", None))
    if cls is not None
)

if TYPE_CHECKING:
    _SerializerBase = serializers.ModelSerializer[Any]
else:
    _SerializerBase = object


class ShardedConditionValidator:
    """DRF's ``UniqueTogetherValidator`` of a conditional ``UniqueConstraint``, for rows
    on shards.

    DRF checks ``condition & Exists(queryset.filter(condition))`` on ``default``, where
    a sharded table is not: the query fails, DRF counts the failure as a conflict, and
    every create is refused. Here the condition is first checked against the row's own
    values (a query that reads no table), and, when it holds, the rows meeting it are
    looked up by DRF's own validator on every shard the set can span.
    """

    requires_context = True

    def __init__(self, validator: Any) -> None:
        self.validator = validator

    def __call__(self, attrs: dict[str, Any], serializer: Any) -> None:
        validator = self.validator
        databases = model_databases(validator.queryset.model)
        if not databases:
            return validator(attrs, serializer)  # type: ignore[no-any-return]
        instance = serializer.instance
        against = {}
        for name in validator.condition_fields:
            source = serializer.fields[name].source
            against[source] = attrs[source] if source in attrs else getattr(instance, source, None)
        try:
            applies = validator.condition.check(against, using=databases[0])
        except FieldError:
            applies = False  # as DRF: a condition it cannot evaluate is no conflict
        if not applies:
            return None
        narrowed = copy.copy(validator)
        narrowed.queryset = validator.queryset.filter(validator.condition)
        narrowed.condition = None
        return narrowed(attrs, serializer)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<ShardedConditionValidator({self.validator!r})>"


class KeyChangeValidator:
    """Refuse an update that gives a stored row a shard key (or a parent it lives with)
    whose rows live on another database: a 400 naming the field.

    The row would stay where it is, lost to its new key; ``save()`` refuses it with
    ``WrongShardError`` (a 500 from a view), and assigning a parent of another shard to
    a co-located key failed in Django itself before. A change within the database, and
    every create, pass; the rule is the core's (``check_key_change``).
    """

    requires_context = True

    def __call__(self, attrs: dict[str, Any], serializer: Any) -> None:
        instance = serializer.instance
        if not isinstance(instance, models.Model):
            return
        link = key_link(type(instance))
        if link is None:
            return
        key = link[1]
        for name, field in serializer.fields.items():
            source = getattr(field, "source", None)
            if source not in (key.name, key.attname) or source not in attrs:
                continue
            if attrs[source] is None:
                return
            message = key_change_message(instance, attrs[source])
            if message is not None:
                raise ValidationError({name: [message]})
            return

    def __repr__(self) -> str:
        return "<KeyChangeValidator>"


class UidSerializerMixin(_SerializerBase):
    """Uid ids, and primary keys that point at uid models, as strings in this serializer.

    Put it before ``ModelSerializer`` (or ``HyperlinkedModelSerializer``, whose hyperlinks
    it leaves alone) in the bases: ``class OrderSerializer(UidSerializerMixin,
    serializers.ModelSerializer)``. Fields with ``choices`` stay choice fields.
    """

    def build_standard_field(
        self, field_name: str, model_field: models.Field[Any, Any]
    ) -> tuple[type[serializers.Field[Any, Any, Any, Any]], dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        if isinstance(model_field, _STRING_ID_FIELDS) and field_class in _DRF_INTEGER_FIELDS:
            field_class = IdStringField
        return field_class, kwargs

    def build_relational_field(
        self, field_name: str, relation_info: RelationInfo
    ) -> tuple[type[serializers.Field[Any, Any, Any, Any]], dict[str, Any]]:
        field_class, kwargs = super().build_relational_field(field_name, relation_info)
        if field_class is serializers.PrimaryKeyRelatedField:
            field_class = StringPrimaryKeyRelatedField
        return field_class, kwargs

    def get_validators(self) -> list[Any]:
        """DRF's validators (``Meta.validators`` or the generated ones), and the refusal of
        a key change that would strand the row (``KeyChangeValidator``)."""
        return [*super().get_validators(), KeyChangeValidator()]

    def get_unique_together_validators(self) -> list[Any]:
        """DRF's validators; those of a conditional constraint on rows that live on
        shards are wrapped (``ShardedConditionValidator``)."""
        return [
            ShardedConditionValidator(validator)
            if getattr(validator, "condition", None) is not None
            else validator
            for validator in super().get_unique_together_validators()
        ]


# -- public ids: tokens instead of ids ------------------------------------------------------
class PublicIdField(serializers.Field):  # type: ignore[type-arg]
    """A uid field's value as its public token (``ord_...``), and a token read back as
    the id. A token of another model, a tampered or malformed one, is a field error."""

    default_error_messages = {"invalid": "A valid public id is required."}

    def __init__(self, *, model_field: UidField, **kwargs: Any) -> None:
        self.model_field = model_field
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str:
        return self.model_field.public_ids.encode(value)

    def to_internal_value(self, data: Any) -> Any:
        try:
            return decode_token(data, self.model_field)
        except PublicIdError:
            self.fail("invalid")


class PublicIdRelatedField(StringPrimaryKeyRelatedField):
    """A related row by its public token, both ways: the lookup decodes the token and
    reads the one shard its id names (``queryset.get(pk=...)``)."""

    default_error_messages = {
        "invalid": "A valid public id is required.",
        "does_not_exist": "No object has this public id.",
    }

    def _target(self) -> UidField:
        queryset: Any = getattr(self, "queryset", None)
        model = getattr(queryset, "model", None)
        if model is None:  # read-only: the model the serializer's relation points at
            owner: Any = self
            if isinstance(self.parent, serializers.ManyRelatedField):
                owner = self.parent  # many=True: the list field holds the name
            model = owner.parent.Meta.model._meta.get_field(owner.source).related_model
        pk = model._meta.pk
        if not isinstance(pk, UidField) or pk.public_prefix is None:
            raise TypeError(f"{model.__name__}'s primary key has no public_prefix")
        return pk

    def to_representation(self, value: Any) -> Any:
        return self._target().public_ids.encode(value.pk)

    def to_internal_value(self, data: Any) -> Any:
        queryset = self.get_queryset()
        try:
            pk = decode_token(data, queryset.model._meta.pk)
        except PublicIdError:
            self.fail("invalid")
        try:
            return queryset.get(pk=pk)
        except queryset.model.DoesNotExist:
            self.fail("does_not_exist")


#: The arguments of DRF's base ``Field`` (the others a model field maps to are numeric).
_FIELD_KWARGS = frozenset(
    {
        "read_only",
        "write_only",
        "required",
        "default",
        "initial",
        "source",
        "label",
        "help_text",
        "style",
        "error_messages",
        "validators",
        "allow_null",
    }
)


class PublicIdSerializerMixin(_SerializerBase):
    """``Meta.public_ids = True``: uid fields with a ``public_prefix`` (the ``id``) and
    keys to models whose primary key has one are tokens, in and out; a list of field
    names limits it to those. The stored ids never appear in the representation."""

    def _public(self, field_name: str) -> bool:
        return shows_public_ids(self, field_name)

    def build_standard_field(
        self, field_name: str, model_field: models.Field[Any, Any]
    ) -> tuple[type[serializers.Field[Any, Any, Any, Any]], dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        if (
            self._public(field_name)
            and isinstance(model_field, UidField)
            and model_field.public_prefix is not None
            and kind_of(model_field) is not None
        ):
            kept = {k: v for k, v in kwargs.items() if k in _FIELD_KWARGS}
            return PublicIdField, {**kept, "model_field": model_field}
        return field_class, kwargs

    def build_relational_field(
        self, field_name: str, relation_info: RelationInfo
    ) -> tuple[type[serializers.Field[Any, Any, Any, Any]], dict[str, Any]]:
        field_class, kwargs = super().build_relational_field(field_name, relation_info)
        target = relation_info.related_model._meta.pk
        if (
            self._public(field_name)
            and issubclass(field_class, serializers.PrimaryKeyRelatedField)
            and isinstance(target, UidField)
            and target.public_prefix is not None
        ):
            kwargs.pop("pk_field", None)
            return PublicIdRelatedField, kwargs
        return field_class, kwargs


if TYPE_CHECKING:
    # Not imported at run time: rest_framework.generics builds APIView, which reads the
    # renderer setting, which may name this module's UidJSONRenderer (an import cycle).
    from rest_framework.generics import GenericAPIView

    _ViewBase = GenericAPIView[Any]
else:
    _ViewBase = object


class PublicIdLookupMixin(_ViewBase):
    """A generic view (viewset) whose URL names the object by its public token: the token
    is decoded to the primary key, so ``get_object()`` reads one shard. Another model's
    token, a tampered or malformed one, or a plain id is a 404."""

    def get_object(self) -> Any:
        queryset = self.filter_queryset(self.get_queryset())
        lookup = self.lookup_url_kwarg or self.lookup_field
        try:
            pk = decode_token(self.kwargs[lookup], queryset.model._meta.pk)
        except PublicIdError:
            raise Http404 from None
        obj = get_object_or_404(queryset, pk=pk)
        self.check_object_permissions(self.request, obj)
        return obj


class UidModelSerializer(PublicIdSerializerMixin, UidSerializerMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    """A ``ModelSerializer`` with uid ids (and keys pointing at uid models) as strings,
    or as public tokens with ``Meta.public_ids = True``."""


def install() -> None:
    """Make every plain ModelSerializer render uid ids (and keys to them) as strings.

    This changes DRF for the whole process; the app calls it at startup only when
    ``UID_FIELDS["DRF_STRING_IDS"]`` is true and ``rest_framework`` is an installed app.
    Prefer ``UidModelSerializer`` / ``UidSerializerMixin``.
    """
    mapping: dict[type[models.Field[Any, Any]], type[serializers.Field[Any, Any, Any, Any]]]
    mapping = serializers.ModelSerializer.serializer_field_mapping
    mapping[SnowflakeField] = IdStringField
    mapping[ShardedBigIntField] = IdStringField
    if serializers.ModelSerializer.serializer_related_field is serializers.PrimaryKeyRelatedField:
        serializers.ModelSerializer.serializer_related_field = StringPrimaryKeyRelatedField


def dumps(data: Any) -> str:
    """``json.dumps`` with ids as strings, for views that do not use DRF's renderer."""
    return json.dumps(data, cls=UidJSONEncoder)
