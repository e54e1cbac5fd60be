"""Settings, read lazily so ``override_settings`` works, and the objects built from them.

``UID_FIELDS = {"GENERATORS": {...}, "SHARDS": {...}}``. Each generator name gets one
generator object per process (a generator per call would reset its sequence and repeat
ids); a changed setting builds new ones.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from ..generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from ..layouts import PRESETS, DecimalLayout, IntLayout, SnowflakeLayout
from ..locality import LocalityUUIDGenerator
from ..placement import route_for
from ..shards import ShardMap
from ..timeutil import parse_instant
from ..uniqid import UniqIdGenerator
from ..workers import FromEnv

__all__ = ["Generator", "conf", "get_generator", "get_shard_map"]

Generator = (
    SnowflakeGenerator
    | ShardedIdGenerator
    | DecimalGenerator
    | LocalityUUIDGenerator
    | UniqIdGenerator
)

KINDS = ("snowflake", "sharded", "decimal", "locality", "uniqid")


class Settings:
    """The UID_FIELDS setting, read at each access."""

    @property
    def raw(self) -> Mapping[str, Any]:
        value = getattr(settings, "UID_FIELDS", {})
        if not isinstance(value, Mapping):
            raise TypeError("settings.UID_FIELDS must be a dict")
        return value

    @property
    def GENERATORS(self) -> Mapping[str, Mapping[str, Any]]:
        return self.raw.get("GENERATORS", {})  # type: ignore[no-any-return]

    @property
    def SHARDS(self) -> Mapping[str, Mapping[str, Any]]:
        return self.raw.get("SHARDS", {})  # type: ignore[no-any-return]

    @property
    def STRICT_ROUTING(self) -> bool:
        return bool(self.raw.get("STRICT_ROUTING", True))

    @property
    def MIGRATE_SHARDED_ON_DEFAULT(self) -> bool:
        return bool(self.raw.get("MIGRATE_SHARDED_ON_DEFAULT", False))


conf = Settings()

_lock = threading.Lock()
_generators: dict[str, Generator] = {}
_shard_maps: dict[tuple[str, str, str | None], ShardMap] = {}


@receiver(setting_changed)
def _reset(setting: str, **kwargs: Any) -> None:
    if setting == "UID_FIELDS":
        with _lock:
            _generators.clear()
            _shard_maps.clear()


def _node_value(name: str, value: Any) -> Any:
    if isinstance(value, Mapping):
        if "env" in value:
            return FromEnv(str(value["env"]))
        if "lease" in value:
            from .leases import lease_from_settings

            return lease_from_settings(name, value)
        raise ValueError(
            f"unknown source for field {name!r}: {dict(value)!r} (use an int, "
            "{'env': 'VAR'} or {'lease': 'redis' | 'database', ...})"
        )
    return value


def build_layout(config: Mapping[str, Any], default: str) -> IntLayout:
    spec = config.get("layout", default)
    if isinstance(spec, str):
        try:
            layout = PRESETS[spec]
        except KeyError:
            raise ValueError(f"unknown layout {spec!r}; choose one of {sorted(PRESETS)}") from None
    elif isinstance(spec, Mapping):
        params = dict(spec)
        params.setdefault("epoch_ms", 0)
        if "fields" in params:
            params["fields"] = tuple(tuple(f) for f in params["fields"])
        if "low_fields" in params:
            params["low_fields"] = tuple(tuple(f) for f in params["low_fields"])
        cls = DecimalLayout if config.get("kind") == "decimal" else SnowflakeLayout
        layout = cls(**params)
    else:
        raise TypeError(f"layout must be a name or a dict of layout parameters, got {spec!r}")
    changes: dict[str, Any] = {}
    if "epoch" in config:
        changes["epoch_ms"] = parse_instant(config["epoch"])
    if "unsigned" in config:
        changes["unsigned"] = bool(config["unsigned"])
    return layout.replace(**changes) if changes else layout


def build_generator(name: str, config: Mapping[str, Any]) -> Generator:
    """A generator from its settings entry; ValueError/TypeError explain what is wrong."""
    kind = config.get("kind")
    if kind not in KINDS:
        raise ValueError(f"generator {name!r}: kind must be one of {list(KINDS)}, got {kind!r}")
    options: dict[str, Any] = {}
    if "max_backward_ms" in config:
        options["max_backward_ms"] = config["max_backward_ms"]
    given = dict(config.get("fields", {}))
    allowed = {"locality": set(), "uniqid": set(), "decimal": {"server"}}.get(kind)
    if allowed is not None and set(given) - allowed:
        raise ValueError(
            f"generator {name!r}: a {kind} generator takes "
            f"{'only ' + ', '.join(sorted(allowed)) if allowed else 'no'} node fields, "
            f"not {sorted(set(given) - allowed)}"
        )
    fields = {k: _node_value(k, v) for k, v in given.items()}
    if kind == "locality":
        return LocalityUUIDGenerator(
            sequential=bool(config.get("sequential", False)),
            pid=config.get("pid"),
            mac=config.get("mac"),
        )
    if kind == "uniqid":
        return UniqIdGenerator(int(config.get("total_shards", 4)), **options)
    if kind == "decimal":
        layout = build_layout(config, "decimal")
        if not isinstance(layout, DecimalLayout):
            raise ValueError(f"generator {name!r}: a decimal generator needs a decimal layout")
        return DecimalGenerator(layout, server=fields.pop("server", 0), **options)
    layout = build_layout(config, "instagram" if kind == "sharded" else "twitter")
    if not isinstance(layout, SnowflakeLayout):
        raise ValueError(f"generator {name!r}: kind {kind!r} needs a bit layout, not {layout!r}")
    if kind == "sharded":
        return ShardedIdGenerator(
            layout,
            shard_field=config.get("shard_field", "shard"),
            key_hash=config.get("key_hash"),
            **options,
            **fields,
        )
    return SnowflakeGenerator(layout, **options, **fields)


def get_generator(name: str) -> Generator:
    """The process-wide generator for a name in ``UID_FIELDS["GENERATORS"]``."""
    generator = _generators.get(name)
    if generator is None:
        with _lock:
            generator = _generators.get(name)
            if generator is None:
                try:
                    config = conf.GENERATORS[name]
                except KeyError:
                    raise LookupError(
                        f"no generator {name!r} in UID_FIELDS['GENERATORS'] "
                        f"(configured: {sorted(conf.GENERATORS)})"
                    ) from None
                generator = build_generator(name, config)
                _generators[name] = generator
    return generator


def get_shard_map(shards: str, generator_name: str) -> ShardMap:
    """The shard map ``shards`` as the ids of ``generator_name`` route through it."""
    key = (shards, generator_name, None)
    shard_map = _shard_maps.get(key)
    if shard_map is None:
        try:
            config = conf.SHARDS[shards]
        except KeyError:
            raise LookupError(
                f"no shard map {shards!r} in UID_FIELDS['SHARDS'] "
                f"(configured: {sorted(conf.SHARDS)})"
            ) from None
        route = route_for(
            get_generator(generator_name),
            by=config.get("route_by"),
            logical_shards=int(config.get("logical_shards", 1024)),
        )
        ranges = config.get("ranges")
        shard_map = ShardMap(
            None if ranges else list(config.get("databases", [])),
            route=route,
            ranges={alias: tuple(span) for alias, span in ranges.items()} if ranges else None,
        )
        with _lock:
            _shard_maps[key] = shard_map
    return shard_map


def shard_databases() -> set[str]:
    """Every alias named by any shard map."""
    aliases: set[str] = set()
    for config in conf.SHARDS.values():
        aliases.update(config.get("databases", []))
        aliases.update(config.get("ranges", {}))
    return aliases
