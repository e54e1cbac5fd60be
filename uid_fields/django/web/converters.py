"""Path converters that only match well-formed ids (anything else is a 404)."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.urls import converters, register_converter

from ...errors import ConfigurationError, PublicIdError
from ...ids.public import spelling
from ..columns.public_ids import codec_for, decode_token

__all__ = [
    "LocalityUUIDConverter",
    "PublicIdConverter",
    "ShardedIdConverter",
    "SnowflakeConverter",
    "register",
]


class SnowflakeConverter:
    """``<snowflake:pk>``: up to 20 digits within unsigned 64 bits (decimal ids need 20)."""

    regex = "[0-9]{1,20}"
    maximum = 2**64 - 1

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > self.maximum:
            raise ValueError(f"{value} is out of range")
        return number

    def to_url(self, value: int | str) -> str:
        return str(int(value))


class ShardedIdConverter(SnowflakeConverter):
    """``<sharded:pk>``: a signed 64-bit id."""

    regex = "[0-9]{1,19}"
    maximum = 2**63 - 1


class LocalityUUIDConverter:
    """``<locality_uuid:pk>``: the hyphenated form with the ``b`` version nibble."""

    regex = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[bB][0-9a-fA-F]{3}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)

    def to_url(self, value: uuid.UUID | str) -> str:
        return str(value)


class PublicIdConverter:
    """``<public:order>``: a public token (``ord_...``) in the path, the stored id (an int
    or a UUID) in the view, so ``Order.objects.get(pk=order)`` reads one shard.

    Any model's token matches, by its prefix; ``PublicIdConverter.for_model(Order)``
    makes a converter that takes only ``Order``'s (register it under a name of your own).
    A token that does not decode (foreign, tampered, truncated, of a retired key) is no
    match: a 404; so is another spelling of a good one (upper case, I/L/O), which
    ``uid_fields.django.middleware.CanonicalPublicIdMiddleware`` redirects (301) to
    the canonical path. Missing keys are ``ImproperlyConfigured``, not a 404.
    ``reverse()`` takes a model instance or a token; the bound converter also an id.
    """

    regex = "[A-Za-z][A-Za-z0-9_]*_[0-9A-Za-z]+"
    model: ClassVar[type[models.Model] | None] = None

    @classmethod
    def for_model(cls, model: type[models.Model]) -> type[PublicIdConverter]:
        """A converter of ``model``'s tokens only (its primary key's ``public_prefix``)."""
        return type(f"{model.__name__}PublicIdConverter", (cls,), {"model": model})

    def _field(self) -> Any:
        return None if self.model is None else self.model._meta.pk

    def to_python(self, value: str) -> Any:
        try:
            found = decode_token(value, self._field())
            if spelling(value) != value:
                # One URL per object: another spelling of the token is no match here
                # (CanonicalPublicIdMiddleware redirects it to the canonical path).
                raise PublicIdError("not the canonical spelling of this public id")
        except ConfigurationError as exc:  # a ValueError, which would read as a 404
            raise ImproperlyConfigured(str(exc)) from exc
        return found

    def to_url(self, value: Any) -> str:
        if isinstance(value, models.Model):
            field = value._meta.pk
            if self.model is not None and not isinstance(value, self.model):
                raise ValueError(f"{value!r} is not a {self.model.__name__}")
            return codec_for(field).encode(value.pk)  # type: ignore[arg-type]
        if isinstance(value, str):
            self.to_python(value)  # ValueError (no match) for a token of no model here
            return value
        field = self._field()
        if field is None:
            raise ValueError(
                "an id names no model: reverse <public:...> with the model instance or its "
                "token (or use PublicIdConverter.for_model(Model))"
            )
        return codec_for(field).encode(value)


def register() -> None:
    """Register the converters (once; a name the project already uses is kept)."""
    taken = converters.get_converters()
    for name, converter in (
        ("snowflake", SnowflakeConverter),
        ("sharded", ShardedIdConverter),
        ("locality_uuid", LocalityUUIDConverter),
        ("public", PublicIdConverter),
    ):
        if name not in taken:
            register_converter(converter, name)
