"""Path converters that only match well-formed ids (anything else is a 404)."""

from __future__ import annotations

import uuid

from django.urls import converters, register_converter

__all__ = ["LocalityUUIDConverter", "ShardedIdConverter", "SnowflakeConverter", "register"]


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


def register() -> None:
    """Register the three converters (once; a name the project already uses is kept)."""
    taken = converters.get_converters()
    for name, converter in (
        ("snowflake", SnowflakeConverter),
        ("sharded", ShardedIdConverter),
        ("locality_uuid", LocalityUUIDConverter),
    ):
        if name not in taken:
            register_converter(converter, name)
