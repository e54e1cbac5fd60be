"""``settings.UID_FIELDS``, read lazily, and the objects built from it.

The parsing and validation live in the core (``uid_fields.config``), shared with
SQLAlchemy; this module only reads the setting at each access (so
``override_settings`` works), keeps one generator per name per process (a generator per
call would reset its sequence and repeat ids), forgets them when the setting changes,
and gives the core Django's database leases.

Reading never raises for a malformed setting: the accessors fall back to the defaults
and the system checks report the mistake (``uid_fields.django.checks``). Building a
generator or a shard map at runtime from a malformed entry raises
``ConfigurationError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .. import config as core
from ..config import Generator, Memo
from ..errors import ConfigurationError
from ..placement import ShardMap
from .leases import database_lease

__all__ = [
    "Generator",
    "build_generator",
    "conf",
    "get_generator",
    "get_shard_map",
    "shard_databases",
]


class Settings:
    """The UID_FIELDS setting, read at each access; a malformed part reads as its default."""

    @property
    def raw(self) -> Mapping[str, Any]:
        value = getattr(settings, "UID_FIELDS", {})
        return value if isinstance(value, Mapping) else {}

    def _entries(self, key: str) -> Mapping[str, Mapping[str, Any]]:
        value = self.raw.get(key, {})
        if not isinstance(value, Mapping):
            return {}
        return {name: entry for name, entry in value.items() if isinstance(entry, Mapping)}

    def _flag(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        return value if isinstance(value, bool) else default

    @property
    def GENERATORS(self) -> Mapping[str, Mapping[str, Any]]:
        return self._entries("GENERATORS")

    @property
    def SHARDS(self) -> Mapping[str, Mapping[str, Any]]:
        return self._entries("SHARDS")

    @property
    def STRICT_ROUTING(self) -> bool:
        return self._flag("STRICT_ROUTING", True)

    @property
    def MIGRATE_SHARDED_ON_DEFAULT(self) -> bool:
        return self._flag("MIGRATE_SHARDED_ON_DEFAULT", False)

    @property
    def UNSHARDED_ON_SHARDS(self) -> bool:
        return self._flag("UNSHARDED_ON_SHARDS", False)

    @property
    def DRF_STRING_IDS(self) -> bool:
        return self._flag("DRF_STRING_IDS", False)


conf = Settings()

_generators: Memo[str, Generator] = Memo()
_shard_maps: Memo[tuple[str, str], ShardMap] = Memo()


# Bumped whenever the settings change, so objects derived from the built generators and
# maps (a field's id maker) know when to derive themselves again.
_generation = 0


@receiver(setting_changed)
def _reset(setting: str, **kwargs: Any) -> None:
    global _generation
    if setting == "UID_FIELDS":
        _generators.clear()
        _shard_maps.clear()
        _generation += 1


def settings_generation() -> int:
    """A number that changes whenever ``UID_FIELDS`` does (``override_settings``)."""
    return _generation


def build_generator(name: str, config: Mapping[str, Any]) -> Generator:
    """A generator from its settings entry, with Django's database leases;
    ``ConfigurationError`` names what is wrong."""
    return core.build_generator(name, config, database_lease=database_lease)


def _entry(section: str, name: str) -> Mapping[str, Any]:
    value = getattr(settings, "UID_FIELDS", {})
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"UID_FIELDS must be a dict, got {type(value).__name__}")
    entries = value.get(section, {})
    if not isinstance(entries, Mapping):
        raise ConfigurationError(f"UID_FIELDS.{section} must be a dict")
    try:
        return entries[name]  # type: ignore[no-any-return]
    except KeyError:
        raise LookupError(
            f"no {'generator' if section == 'GENERATORS' else 'shard map'} {name!r} in "
            f"UID_FIELDS[{section!r}] (configured: {sorted(entries)})"
        ) from None


def get_generator(name: str) -> Generator:
    """The generator that the settings name: ``UID_FIELDS["GENERATORS"][name]``.

    For code that makes ids outside a model; the fields use the same object. Built on
    first use (claiming its leases then) and kept for the process.
    """
    return _generators.build(name, lambda: build_generator(name, _entry("GENERATORS", name)))


def get_shard_map(shards: str, generator_name: str) -> ShardMap:
    """The shard map ``shards`` as the ids of ``generator_name`` route through it."""

    def make() -> ShardMap:
        config = _entry("SHARDS", shards)
        return core.build_shard_map(config, get_generator(generator_name))

    return _shard_maps.build((shards, generator_name), make)


def shard_databases() -> set[str]:
    """Every alias named by any shard map (incoming ones too: they get migrated)."""
    return {alias for entry in conf.SHARDS.values() for alias in core.shard_map_aliases(entry)}
