"""``settings.UID_FIELDS``, read lazily, and the objects built from it.

The parsing, validation and building live in the core's ``UidConfig``, shared with
SQLAlchemy: this module holds one, made from the setting at first use and made again
when the setting changes (so ``override_settings`` works), and gives it Django's
database leases. So a generator is built once per name per process (a generator per
call would reset its sequence and repeat ids), and what the system checks refuse is
refused at first use too: a WSGI worker runs no checks, and a sharded generator E016
refuses would issue the same ids in two workers.

Reading never raises for a malformed setting: the ``conf`` accessors fall back to the
defaults and the system checks report the mistake (``uid_fields.django.checks``).
Getting a generator or a shard map raises ``ConfigurationError`` naming the key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .. import config as core
from .._internal.validate import integer, positive_seconds
from ..config import Generator, UidConfig
from ..ops.pages import DEFAULT_OFFSET_WARNING
from ..ops.parallel import DEFAULT_TIMEOUT_S, check_concurrency
from ..placement import ShardMap
from .leases import database_lease

__all__ = [
    "Generator",
    "build_generator",
    "conf",
    "get_generator",
    "get_shard_map",
    "shard_databases",
    "uid_config",
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

    @property
    def FAN_OUT_TIMEOUT(self) -> float:
        """Seconds a fan-out waits for every shard (a malformed value reads as the
        default; check E014 reports it)."""
        value = self.raw.get("FAN_OUT_TIMEOUT", DEFAULT_TIMEOUT_S)
        try:
            return positive_seconds("FAN_OUT_TIMEOUT", value)
        except (TypeError, ValueError):
            return DEFAULT_TIMEOUT_S

    @property
    def FAN_OUT_CONCURRENCY(self) -> int | None:
        """Queries a process runs on one shard at once for fan-outs; None (the setting is
        absent or malformed: check E014 reports it) leaves the pool's default,
        ``uid_fields.ops.parallel.workers()``."""
        value = self.raw.get("FAN_OUT_CONCURRENCY")
        try:
            return None if value is None else check_concurrency("FAN_OUT_CONCURRENCY", value)
        except (TypeError, ValueError):
            return None

    @property
    def FAN_OUT_OFFSET_WARNING(self) -> int | None:
        """The OFFSET above which a fan-out warns (once per model, DEBUG on or off);
        None: never.
        A malformed value reads as the default."""
        if "FAN_OUT_OFFSET_WARNING" in self.raw and self.raw["FAN_OUT_OFFSET_WARNING"] is None:
            return None
        value = self.raw.get("FAN_OUT_OFFSET_WARNING", DEFAULT_OFFSET_WARNING)
        try:
            return integer("FAN_OUT_OFFSET_WARNING", value, 0)
        except (TypeError, ValueError):
            return DEFAULT_OFFSET_WARNING

    @property
    def UNPROTECTED_SHARD_WRITES(self) -> str:
        """ "debug" (warn when DEBUG is on), "warn", "error" or "ignore"."""
        value = self.raw.get("UNPROTECTED_SHARD_WRITES", "debug")
        valid = isinstance(value, str) and value in core.UNPROTECTED_WRITE_MODES
        return value if valid else "debug"


conf = Settings()

_config: UidConfig | None = None
_config_lock = threading.Lock()

#: The generators ``uid_config()`` returned, by name: what a field asks for each value
#: it binds (``get_internal_type``) without going through the lock. Cleared with it.
_generators: dict[str, Generator] = {}


# Bumped whenever the settings change, so objects derived from the built generators and
# maps (a field's id maker) know when to derive themselves again.
_generation = 0


@receiver(setting_changed)
def _reset(setting: str, **kwargs: Any) -> None:
    global _config, _generation
    if setting == "UID_FIELDS":
        with _config_lock:
            _config = None
            _generators.clear()
            _generation += 1


def settings_generation() -> int:
    """A number that changes whenever ``UID_FIELDS`` does (``override_settings``)."""
    return _generation


#: Says which generators only a database makes ids for (every field using them has
#: ``database_default=True``): ``uid_fields.django.fields`` adds its scan of the models,
#: so this module needs no import of the fields (which import it).
DATABASE_MADE: list[Callable[[], set[str]]] = []


def uid_config() -> UidConfig:
    """The core's ``UidConfig`` of ``settings.UID_FIELDS``, made at first use (never at
    import, so ``manage.py`` commands start with any setting and the checks report it).

    ``ConfigurationError`` for a setting the checks refuse, naming every wrong key.
    """
    global _config
    config = _config
    if config is None:
        with _config_lock:
            config = _config
            if config is None:
                # Before the models are loaded no field can say its ids are made by a
                # database: nothing is exempt from E016 then.
                made = (
                    {name for scan in DATABASE_MADE for name in scan()}
                    if apps.models_ready
                    else set()
                )
                config = _config = UidConfig(
                    getattr(settings, "UID_FIELDS", {}),
                    database_lease=database_lease,
                    database_made=made,
                )
    return config


def build_generator(name: str, config: Mapping[str, Any]) -> Generator:
    """A new generator from a settings entry, with Django's database leases (each call
    builds one: the fields use ``get_generator``); ``ConfigurationError`` names what
    is wrong."""
    return core.build_generator(name, config, database_lease=database_lease)


def get_generator(name: str) -> Generator:
    """The generator that the settings name: ``UID_FIELDS["GENERATORS"][name]``.

    For code that makes ids outside a model; the fields use the same object. Built on
    first use (claiming its leases then) and kept for the process. A
    ``ConfigurationError`` (a ``LookupError`` too for an unknown name) when the checks
    would refuse it.
    """
    generator = _generators.get(name)
    if generator is None:
        generation = _generation
        generator = uid_config().generator(name)
        with _config_lock:
            if generation == _generation:  # not one of a setting changed meanwhile
                generator = _generators.setdefault(name, generator)
    return generator


def get_shard_map(shards: str, generator_name: str) -> ShardMap:
    """The shard map ``shards`` as the ids of ``generator_name`` route through it."""
    return uid_config().shard_map(shards, generator_name)


def shard_databases() -> set[str]:
    """Every alias named by any shard map (incoming ones too: they get migrated)."""
    return {alias for entry in conf.SHARDS.values() for alias in core.shard_map_aliases(entry)}
