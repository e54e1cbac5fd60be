"""The whole settings dict validated: every key, type and bound, reported as problems with
key paths. Pure: it reads the dict and the clock and never builds a generator, so it never
claims a lease or opens a connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .._internal import validate as check
from .._internal.timeutil import format_ms, parse_epoch
from .._internal.validate import shown
from ..ids.layouts import PRESETS, DecimalLayout, IntLayout, SnowflakeLayout
from ..ids.leases.state import check_ttl
from ..ids.locality import mac_bits
from ..ids.sequences import MAX_KEY_TTL_MS
from ..ids.sequences import MODES as SEQUENCE_MODES
from ..sql.postgres import LANGUAGES as NEXT_ID_LANGUAGES
from .layouts import DEFAULT_LAYOUT, LAYOUT_KEYS, build_layout, node_fields, shard_field_of
from .problems import (
    E_GENERATOR,
    E_PROCESSES,
    E_TYPE,
    Problem,
    Report,
    key_names,
    key_path,
    type_name,
)
from .public_ids import public_ids_problems
from .shard_maps import shard_map_problems

KINDS = ("snowflake", "sharded", "decimal", "locality", "uniqid")

KEY_HASHES = ("modulo", "mixed")


#: The top-level keys and the type each value must have.
TOP_LEVEL: dict[str, type] = {
    "GENERATORS": dict,
    "SHARDS": dict,
    "STRICT_ROUTING": bool,
    "MIGRATE_SHARDED_ON_DEFAULT": bool,
    "UNSHARDED_ON_SHARDS": bool,
    "DRF_STRING_IDS": bool,
    "READ_YOUR_WRITES_SECONDS": float,
    "FAN_OUT_TIMEOUT": float,
    "FAN_OUT_CONCURRENCY": int,
    "FAN_OUT_OFFSET_WARNING": int,
    "UNPROTECTED_SHARD_WRITES": str,
    "PUBLIC_IDS": dict,
}

#: The highest ``FAN_OUT_CONCURRENCY`` (queries per shard at once per process); the
#: fan-out pool (``uid_fields.ops.parallel.MAX_WORKERS``) accepts the same.
MAX_FAN_OUT_CONCURRENCY = 256

#: What a write to a shard inside a transaction that holds none there does
#: (``UNPROTECTED_SHARD_WRITES``): warn when DEBUG is on (the default), always warn,
#: raise, or nothing.
UNPROTECTED_WRITE_MODES = ("debug", "warn", "error", "ignore")


_INT_KEYS = frozenset({"kind", "layout", "epoch", "unsigned", "fields", "max_backward_ms"})


GENERATOR_KEYS: dict[str, frozenset[str]] = {
    "snowflake": _INT_KEYS | {"sequence"},
    "sharded": _INT_KEYS
    | {"shard_field", "key_hash", "sequence", "single_process", "max_ahead_ms"}
    | {"next_id_language"},
    "decimal": _INT_KEYS,
    "locality": frozenset({"kind", "fields", "sequential", "pid", "mac"}),
    "uniqid": frozenset({"kind", "fields", "total_shards", "max_backward_ms"}),
}


SEQUENCE_KEYS = frozenset({"redis", "prefix", "key_ttl_ms", "mode"})


LEASE_KEYS = {
    "redis": frozenset({"lease", "url", "name", "ttl", "margin", "prefix"}),
    "database": frozenset({"lease", "database", "name", "ttl", "margin"}),
}


def validate(settings: object, *, now_ms: int | None = None) -> list[Problem]:
    """Every problem of a settings dict (``UID_FIELDS``); an empty list when it is sound.

    Pure: builds no generator, claims no lease, opens no connection.
    """
    return validate_all(settings, now_ms=now_ms, database_leases=True)


def validate_all(settings: object, *, now_ms: int | None, database_leases: bool) -> list[Problem]:
    report = Report()
    if not isinstance(settings, Mapping):
        report.add(
            "",
            f"the settings must be a dict of {sorted(TOP_LEVEL)}, got {type_name(settings)}",
            E_TYPE,
        )
        return report.problems
    report.keys("", settings, TOP_LEVEL)
    for key, kind in TOP_LEVEL.items():
        if key in settings and kind is bool:
            report.flag(key, settings[key])
    if "READ_YOUR_WRITES_SECONDS" in settings:
        pin = settings["READ_YOUR_WRITES_SECONDS"]
        report.call(
            "READ_YOUR_WRITES_SECONDS",
            E_TYPE,
            lambda: check.non_negative_number("READ_YOUR_WRITES_SECONDS", pin),
        )
    if "FAN_OUT_TIMEOUT" in settings:
        deadline = settings["FAN_OUT_TIMEOUT"]
        report.call(
            "FAN_OUT_TIMEOUT", E_TYPE, lambda: check.positive_seconds("FAN_OUT_TIMEOUT", deadline)
        )
    if "FAN_OUT_CONCURRENCY" in settings:
        bound = settings["FAN_OUT_CONCURRENCY"]
        report.call(
            "FAN_OUT_CONCURRENCY",
            E_TYPE,
            lambda: check.integer("FAN_OUT_CONCURRENCY", bound, 0, MAX_FAN_OUT_CONCURRENCY),
        )
    if settings.get("FAN_OUT_OFFSET_WARNING") is not None:
        threshold = settings["FAN_OUT_OFFSET_WARNING"]
        report.call(
            "FAN_OUT_OFFSET_WARNING",
            E_TYPE,
            lambda: check.integer("FAN_OUT_OFFSET_WARNING", threshold, 0),
        )
    if "UNPROTECTED_SHARD_WRITES" in settings:
        report.choice(
            "UNPROTECTED_SHARD_WRITES",
            settings["UNPROTECTED_SHARD_WRITES"],
            UNPROTECTED_WRITE_MODES,
            E_TYPE,
        )
    generators = report.mapping("GENERATORS", settings.get("GENERATORS", {}), "GENERATORS")
    for name, config in (generators or {}).items():
        report.problems.extend(
            generator_problems(name, config, now_ms=now_ms, database_leases=database_leases)
        )
    shards = report.mapping("SHARDS", settings.get("SHARDS", {}), "SHARDS")
    for name, config in (shards or {}).items():
        report.problems.extend(shard_map_problems(name, config))
    if "PUBLIC_IDS" in settings:
        report.problems.extend(public_ids_problems(settings["PUBLIC_IDS"]))
    return report.problems


def generator_problems(
    name: object, config: object, *, now_ms: int | None = None, database_leases: bool = True
) -> list[Problem]:
    """The problems of one ``GENERATORS`` entry (paths start ``GENERATORS.<name>``)."""
    report = Report()
    path = key_path("GENERATORS", name)
    if not isinstance(name, str) or not name:
        report.add(path, f"generator names must be non-empty strings, got {shown(name)}", E_TYPE)
    entry = report.mapping(path, config, f"generator {shown(name)}")
    if entry is None:
        return report.problems
    kind = entry.get("kind")
    if "kind" not in entry:
        report.add(
            key_path(path, "kind"), f"kind must be one of {list(KINDS)}; is required", E_GENERATOR
        )
        return report.problems
    if not report.choice(
        key_path(path, "kind"), kind, KINDS, E_GENERATOR, f"kind must be one of {list(KINDS)}"
    ):
        return report.problems
    assert isinstance(kind, str)  # one of KINDS
    report.keys(path, entry, GENERATOR_KEYS[kind])
    if "max_backward_ms" in entry:
        report.call(
            key_path(path, "max_backward_ms"),
            E_TYPE,
            lambda: check.non_negative_number("max_backward_ms", entry["max_backward_ms"]),
        )
    if "max_ahead_ms" in entry and entry["max_ahead_ms"] is not None:
        report.call(
            key_path(path, "max_ahead_ms"),
            E_TYPE,
            lambda: check.integer("max_ahead_ms", entry["max_ahead_ms"], 1, 10**12),
        )
    if "next_id_language" in entry:
        report.choice(
            key_path(path, "next_id_language"),
            entry["next_id_language"],
            NEXT_ID_LANGUAGES,
            E_GENERATOR,
        )
    layout = None
    if kind in DEFAULT_LAYOUT:
        layout = _layout_problems(report, path, entry, kind, now_ms)
    elif kind == "locality":
        if "sequential" in entry:
            report.flag(key_path(path, "sequential"), entry["sequential"])
        if entry.get("pid") is not None:
            report.call(
                key_path(path, "pid"),
                E_GENERATOR,
                lambda: check.integer("pid", entry["pid"], 0, 65535),
            )
        if entry.get("mac") is not None:
            report.call(key_path(path, "mac"), E_GENERATOR, lambda: mac_bits(entry["mac"]))
    elif kind == "uniqid" and "total_shards" in entry:
        report.call(
            key_path(path, "total_shards"),
            E_GENERATOR,
            lambda: check.integer("total_shards", entry["total_shards"], 1, 10),
        )
    _fields_problems(report, path, entry, kind, layout, database_leases)
    if "sequence" in entry and entry["sequence"] is not None:
        _sequence_problems(report, key_path(path, "sequence"), entry["sequence"])
    if "single_process" in entry:
        report.flag(key_path(path, "single_process"), entry["single_process"])
    return report.problems


def process_problems(name: str, config: Mapping[str, Any]) -> list[Problem]:
    """E016 for a valid generator entry whose Python-made ids collide across processes.

    Kept apart from the shape checks: a generator used only to decode ids a database
    makes (``database_default``) is safe as it is, and its adapter says so.
    """
    if config.get("kind") != "sharded" or process_safe(config):
        return []
    return [
        Problem(
            key_path("GENERATORS", name),
            "makes Instagram-style ids in Python with a per-process sequence and no node "
            "id: two processes writing one shard issue the same ids. Share the sequence "
            '("sequence": {"redis": url}), give each process a node field of the layout '
            "(an env value or a lease), make the ids in PostgreSQL (database_default), or "
            'declare "single_process": True if only one process ever writes',
            E_PROCESSES,
        )
    ]


def process_safe(entry: Mapping[str, Any]) -> bool:
    """Whether a sharded generator entry keeps several processes' ids apart by itself.

    A shared sequence, or a node field whose value differs per process (from the
    environment or a lease), does; so does the user's word that one process writes.
    """
    if entry.get("single_process") is True or entry.get("sequence") is not None:
        return True
    fields = entry.get("fields") or {}
    return any(isinstance(v, Mapping) for v in fields.values())


def _sequence_problems(report: Report, path: str, spec: object) -> None:
    entry = report.mapping(path, spec, "a sequence")
    if entry is None:
        return
    report.keys(path, entry, SEQUENCE_KEYS)
    url = entry.get("redis")
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        report.add(key_path(path, "redis"), f"a redis:// URL is required, got {shown(url)}", E_TYPE)
    if "key_ttl_ms" in entry:
        report.call(
            key_path(path, "key_ttl_ms"),
            E_TYPE,
            lambda: check.integer("key_ttl_ms", entry["key_ttl_ms"], 1, MAX_KEY_TTL_MS),
        )
    if "prefix" in entry and not isinstance(entry["prefix"], str):
        report.add(key_path(path, "prefix"), "prefix must be a string", E_TYPE)
    if "mode" in entry:
        report.choice(
            key_path(path, "mode"),
            entry["mode"],
            SEQUENCE_MODES,
            E_TYPE,
            f"mode must be one of {', '.join(SEQUENCE_MODES)}",
        )


def _layout_problems(
    report: Report, path: str, entry: Mapping[str, Any], kind: str, now_ms: int | None
) -> IntLayout | None:
    found = len(report.problems)
    for key in ("unsigned",):
        if key in entry:
            report.flag(key_path(path, key), entry[key])
    spec = entry.get("layout", DEFAULT_LAYOUT[kind])
    cls = DecimalLayout if kind == "decimal" else SnowflakeLayout
    if isinstance(spec, Mapping):
        report.keys(key_path(path, "layout"), spec, LAYOUT_KEYS[cls])
    elif isinstance(spec, str):
        if spec not in PRESETS:
            report.add(
                key_path(path, "layout"),
                f"unknown layout {shown(spec)}; choose one of {sorted(PRESETS)}",
                E_GENERATOR,
            )
    else:
        report.add(
            key_path(path, "layout"),
            f"layout must be a preset name or a dict of layout parameters, got {shown(spec)}",
            E_TYPE,
        )
    if "epoch" in entry:
        report.call(key_path(path, "epoch"), E_GENERATOR, lambda: parse_epoch(entry["epoch"]))
    if len(report.problems) > found:
        return None
    layout: IntLayout | None = None

    def make() -> None:
        nonlocal layout
        layout = build_layout(entry, kind)

    if not report.call(key_path(path, "layout"), E_GENERATOR, make) or layout is None:
        return None
    if not isinstance(layout, cls):
        report.add(
            key_path(path, "layout"),
            f"a {kind} generator needs a {'decimal' if cls is DecimalLayout else 'bit'} "
            f"layout, not {layout!r}",
            E_GENERATOR,
        )
        return None
    now = _now_ms() if now_ms is None else now_ms
    if layout.epoch_ms > now:
        report.add(
            key_path(path, "epoch" if "epoch" in entry else "layout"),
            f"epoch {format_ms(layout.epoch_ms)} is in the future (now is {format_ms(now)}): "
            "ids before it cannot be represented",
            E_GENERATOR,
        )
    if kind == "sharded":
        assert isinstance(layout, SnowflakeLayout)
        shard_field = entry.get("shard_field", "shard")
        named = report.text(key_path(path, "shard_field"), shard_field, "a field name")
        if named and shard_field not in layout.field_names:
            report.add(
                key_path(path, "shard_field"),
                f"layout has no {shown(shard_field)} field to carry the shard; its fields "
                f"are {list(layout.field_names)}",
                E_GENERATOR,
            )
        if "key_hash" in entry:
            report.choice(
                key_path(path, "key_hash"),
                entry["key_hash"],
                KEY_HASHES,
                E_GENERATOR,
                "key_hash must be 'modulo' or 'mixed'",
            )
    return layout


def _fields_problems(
    report: Report,
    path: str,
    entry: Mapping[str, Any],
    kind: str,
    layout: IntLayout | None,
    database_leases: bool,
) -> None:
    fields = report.mapping(key_path(path, "fields"), entry.get("fields", {}), "fields")
    if fields is None:
        return
    if kind in DEFAULT_LAYOUT and layout is None:
        return  # the layout's own problem is reported; its fields are unknown
    allowed = node_fields(kind, entry, layout)
    extra = key_names(name for name in fields if name not in allowed)
    if extra:
        shard_field = shard_field_of(entry)
        if kind == "sharded" and shard_field is not None and shard_field in fields:
            what = f"{shard_field!r} is chosen per id, not configured; "
        else:
            what = ""
        takes = "only " + ", ".join(sorted(allowed)) if allowed else "no"
        report.add(
            key_path(path, "fields"),
            f"{what}a {kind} generator takes {takes} node fields, not {extra}",
            E_GENERATOR,
        )
    for field, value in fields.items():
        if field in allowed and layout is not None:
            maximum = (
                layout.max_server
                if isinstance(layout, DecimalLayout)
                else (1 << layout.field_bits(field)) - 1
                if isinstance(layout, SnowflakeLayout)
                else 0
            )
            at = key_path(key_path(path, "fields"), field)
            _node_problems(report, at, field, value, maximum, database_leases)


def _node_problems(
    report: Report,
    path: str,
    field: str,
    value: object,
    maximum: int,
    database_leases: bool,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, Mapping)):
        report.add(
            path,
            f"the {field!r} value must be an int, {{'env': 'VAR'}} or "
            f"{{'lease': 'redis' | 'database', ...}}, got {shown(value)}",
            E_TYPE,
        )
    elif isinstance(value, int):
        report.call(path, E_GENERATOR, lambda: check.in_range(field, value, maximum))
    elif "env" in value:
        report.keys(path, value, ("env",))
        report.text(key_path(path, "env"), value["env"], "the name of an environment variable")
    elif "lease" in value:
        _lease_problems(report, path, field, value, database_leases)
    else:
        report.add(
            path,
            f"unknown source for field {field!r}: {shown(dict(value))} (use an int, "
            "{'env': 'VAR'} or {'lease': 'redis' | 'database', ...})",
            E_GENERATOR,
        )


def _lease_problems(
    report: Report, path: str, field: str, lease: Mapping[str, Any], database_leases: bool
) -> None:
    kind = lease["lease"]
    if not report.choice(
        key_path(path, "lease"),
        kind,
        LEASE_KEYS,
        E_GENERATOR,
        f"the {field!r} lease must be 'redis' or 'database'",
    ):
        return
    report.keys(path, lease, LEASE_KEYS[kind])
    name = lease.get("name")
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        report.add(
            key_path(path, "name"),
            f"the {field!r} lease needs a 'name' (the id space shared by the processes that "
            f"must not collide): a string without spaces, got {shown(name)}",
            E_GENERATOR if name is None or isinstance(name, str) else E_TYPE,
        )
        name = "valid"
    try:
        check_ttl(name, lease.get("ttl", 10.0), lease.get("margin"))
    except (TypeError, ValueError) as exc:
        key = "margin" if str(exc).startswith("margin") else "ttl"
        code = E_TYPE if isinstance(exc, TypeError) else E_GENERATOR
        report.add(key_path(path, key), str(exc), code)
    if kind == "redis":
        url = lease.get("url")
        if not isinstance(url, str):
            report.add(
                key_path(path, "url"),
                f"the {field!r} Redis lease needs a 'url' (redis://host:port/db), got {shown(url)}",
                E_GENERATOR if url is None else E_TYPE,
            )
        if "prefix" in lease:
            report.text(key_path(path, "prefix"), lease["prefix"])
    else:
        if "database" in lease:
            report.text(key_path(path, "database"), lease["database"], "a database name")
        if not database_leases:
            report.add(
                path,
                "a database lease needs the connections of an ORM: pass database_lease= "
                "(uid_fields.sqlalchemy.lease_factory({name: engine}), for one)",
                E_GENERATOR,
            )


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)
