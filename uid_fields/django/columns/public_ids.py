"""Public ids of Django models: ``public_prefix="ord"`` on a uid field.

A field with a prefix shows its ids to the public as tokens (``ord_...``, see
``uid_fields.ids.public``) made with the keys of ``UID_FIELDS["PUBLIC_IDS"]["KEYS"]``:

* ``obj.public_id`` is the token of the primary key (``obj.<name>_public_id`` for another
  uid field with a prefix); ``field.public_ids`` is the codec.
* ``uid_fields.django.web.converters.PublicIdConverter`` (``<public:order>`` in a path) turns
  a token into the stored id before the view runs, so ``get(pk=...)`` reads one shard.
* ``uid_fields.django.rest`` renders and accepts tokens; the admin searches by them.

The prefix is no database attribute: ``deconstruct()`` leaves it out, so adding,
changing or removing it makes no migration. Which prefix belongs to which model is
known from the models themselves (the registry below); check E032 refuses a prefix two
models share, since their tokens would be read as each other's.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from django.apps import apps as global_apps
from django.db import models

from ...errors import PublicIdError
from ...ids.public import Kind, PublicIds
from .. import conf

__all__ = [
    "PublicField",
    "PublicIdDescriptor",
    "add_public_id",
    "attribute_name",
    "canonical_token",
    "codec_for",
    "decode_token",
    "field_for_prefix",
    "kind_of",
    "shows_public_ids",
    "token_prefix",
]


class PublicField(Protocol):
    """What this module reads of a uid field with a prefix (``fields.UidField`` is one).

    Declared here, below the fields: the fields build on this module (``add_public_id``
    when a field joins its model), so it names what it reads instead of importing them.
    """

    @property
    def public_prefix(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def attname(self) -> str: ...
    @property
    def primary_key(self) -> bool: ...
    @property
    def model(self) -> type[models.Model]: ...


#: The uid field of each prefix, among the concrete models of the project's registry
#: (models of other registries, such as migrations' historical ones, have no prefix).
_FIELDS: dict[str, PublicField] = {}


def kind_of(field: object) -> Kind | None:
    """What a field's tokens hold: ``"int"`` ids, ``"uuid"`` values, or None (text ids,
    which have no public form)."""
    if isinstance(field, models.UUIDField):
        return "uuid"
    if isinstance(field, models.BigIntegerField):
        return "int"
    return None


def codec_for(field: PublicField) -> PublicIds:
    """The codec of a field with a ``public_prefix``, from the settings' keys (made at
    first use, made again when ``UID_FIELDS`` changes). A ``ConfigurationError`` saying
    what to set when no keys are configured."""
    prefix = field.public_prefix
    if prefix is None:
        raise TypeError(f"{field.model.__name__}.{field.name} has no public_prefix")
    return conf.uid_config().public_ids(prefix, kind=kind_of(field))


def attribute_name(field: PublicField) -> str:
    """``public_id`` for a primary key, ``<name>_public_id`` for another field."""
    return "public_id" if field.primary_key else f"{field.name}_public_id"


class PublicIdDescriptor:
    """``obj.public_id``: the token of the field's value (None while it has none)."""

    def __init__(self, field: PublicField) -> None:
        self.field = field

    def __get__(self, instance: models.Model | None, owner: type) -> Any:
        if instance is None:
            return self
        value = getattr(instance, self.field.attname)
        if not isinstance(value, (int, uuid.UUID)):
            return None  # unset, or a database default not read back yet
        return codec_for(self.field).encode(value)

    def __set__(self, instance: models.Model, value: Any) -> None:
        raise AttributeError(
            f"{attribute_name(self.field)} is read from {self.field.attname}; set that "
            f"(or decode a token with {type(instance).__name__}._meta.get_field("
            f"{self.field.name!r}).public_ids.decode(token))"
        )


def add_public_id(field: PublicField, cls: type[models.Model], name: str) -> None:
    """Called when a uid field joins a model class: the ``public_id`` attribute, and the
    prefix registered for URL converters (concrete models of the project's registry)."""
    prefix = field.public_prefix
    if prefix is None:
        return
    attribute = "public_id" if field.primary_key else f"{name}_public_id"
    if attribute not in cls.__dict__:
        setattr(cls, attribute, PublicIdDescriptor(field))
    if not cls._meta.abstract and cls._meta.apps is global_apps and isinstance(prefix, str):
        _FIELDS.setdefault(prefix, field)


def field_for_prefix(prefix: str) -> PublicField | None:
    """The uid field whose tokens start with ``prefix_`` (None if no model has it)."""
    return _FIELDS.get(prefix)


def token_prefix(token: str) -> str:
    """The prefix a token names, lower-case (``"ord"`` for ``ord_...``; ``""`` if none)."""
    head = token.rpartition("_")[0]
    return head.lower() if head.isascii() else ""


def decode_token(token: object, field: PublicField | None = None) -> Any:
    """The stored id a token stands for: of ``field``'s model, or of whichever model's
    prefix the token carries. ``PublicIdError`` (a ``ValueError``) for a token of no
    model here, or one that does not decode."""
    if not isinstance(token, str):
        raise PublicIdError(f"a public id is a string, got {type(token).__name__}")
    if field is None:
        field = field_for_prefix(token_prefix(token))
        if field is None:
            raise PublicIdError("not a public id of any model: no model has its prefix")
    return codec_for(field).decode(token)


def canonical_token(token: str, field: PublicField | None = None) -> str:
    """The canonical spelling of a token of ``field``'s model (or of the model its
    prefix names): ``PublicIds.canonical``. ``PublicIdError`` as ``decode_token``."""
    if field is None:
        field = field_for_prefix(token_prefix(token))
        if field is None:
            raise PublicIdError("not a public id of any model: no model has its prefix")
    return codec_for(field).canonical(token)


def shows_public_ids(serializer: Any, field_name: str) -> bool:
    """Whether a DRF serializer (class or instance) shows ``field_name`` as tokens: its
    ``Meta.public_ids`` is True or names the field."""
    option = getattr(getattr(serializer, "Meta", None), "public_ids", False)
    if option is True:
        return True
    return isinstance(option, (list, tuple, set, frozenset)) and field_name in option
