"""Plain dicts -> generators, shard maps and leases, with every key validated.

One settings dict serves both ORMs: Django reads it from ``settings.UID_FIELDS`` and
reports its problems as system checks; SQLAlchemy and plain Python hand it to
``UidConfig``, which raises ``ConfigurationError`` naming the key. So a project with
both ORMs declares its generators and shard maps once.

``validate`` is pure: it reads the dict and the clock, builds layouts (plain values),
and never makes a generator, so it never claims a lease or opens a connection. Every
problem names its key as a dotted path (``GENERATORS.orders.max_backward_ms``) and has a
stable code, the number of the Django check that reports it:

* ``E004`` a shard map that cannot work (no databases, duplicates, empty ranges ...)
* ``E005`` a generator option with a wrong value (unknown kind or layout, an epoch in
  the future, a node value out of range, a lease without a name ...)
* ``E013`` an unknown key (a typo: ``max_backwards_ms``, ``STRICT_ROUTNG``, ``databses``)
* ``E014`` a value of the wrong type or shape (``"STRICT_ROUTING": "no"``, a list where
  a dict is due, NaN where a finite number is due)

The database lease is the one thing the core cannot build alone: its connections come
from the ORM. The adapters inject a factory (``database_lease=``) with the signature
``(name, ttl, *, database, margin) -> lease``.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from . import validate as check
from .errors import ConfigurationError
from .generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from .layouts import PRESETS, DecimalLayout, IntLayout, SnowflakeLayout
from .leases import RedisLease
from .leases.state import check_ttl
from .locality import LocalityUUIDGenerator, mac_bits
from .placement import natural_route, route_for
from .sequences import MODES as SEQUENCE_MODES
from .sequences import RedisSequence
from .shards import Route, ShardMap
from .sql.postgres import LANGUAGES as NEXT_ID_LANGUAGES
from .timeutil import format_ms, parse_instant
from .uniqid import UniqIdGenerator
from .workers import FromEnv, NodeSource, NodeValue

__all__ = [
    "KINDS",
    "DatabaseLeaseFactory",
    "Generator",
    "Memo",
    "Problem",
    "UidConfig",
    "build_generator",
    "build_layout",
    "build_shard_map",
    "describe",
    "generator_problems",
    "layout_of",
    "map_databases",
    "replicas_of",
    "route_of",
    "shard_map_aliases",
    "shard_map_of",
    "shard_map_problems",
    "static_node",
    "validate",
]

Generator = (
    SnowflakeGenerator
    | ShardedIdGenerator
    | DecimalGenerator
    | LocalityUUIDGenerator
    | UniqIdGenerator
)

#: ``(name, ttl, *, database, margin) -> lease``: how an adapter makes a database lease.
DatabaseLeaseFactory = Callable[..., NodeSource]

KINDS = ("snowflake", "sharded", "decimal", "locality", "uniqid")

E_SHARD_MAP = "E004"
E_GENERATOR = "E005"
E_UNKNOWN_KEY = "E013"
E_TYPE = "E014"
E_PROCESSES = "E016"

#: The top-level keys and the type each value must have.
TOP_LEVEL: dict[str, type] = {
    "GENERATORS": dict,
    "SHARDS": dict,
    "STRICT_ROUTING": bool,
    "MIGRATE_SHARDED_ON_DEFAULT": bool,
    "UNSHARDED_ON_SHARDS": bool,
    "DRF_STRING_IDS": bool,
    "READ_YOUR_WRITES_SECONDS": float,
}
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
_DEFAULT_LAYOUT = {"snowflake": "twitter", "sharded": "instagram", "decimal": "decimal"}
_LAYOUT_KEYS: dict[type[IntLayout], frozenset[str]] = {
    SnowflakeLayout: frozenset(
        {"epoch_ms", "fields", "time_bits", "sequence_bits", "time_unit_ms", "low_fields"}
        | {"unsigned", "name"}
    ),
    DecimalLayout: frozenset(
        {"epoch_ms", "time_digits", "random_digits", "server_digits", "time_unit_ms"}
        | {"unsigned", "name"}
    ),
}
SEQUENCE_KEYS = frozenset({"redis", "prefix", "key_ttl_ms", "mode"})
LEASE_KEYS = {
    "redis": frozenset({"lease", "url", "name", "ttl", "margin", "prefix"}),
    "database": frozenset({"lease", "database", "name", "ttl", "margin"}),
}
SHARD_MAP_KEYS = frozenset(
    {"databases", "ranges", "logical_shards", "route_by", "closed", "incoming", "replicas"}
)


@dataclass(frozen=True)
class Problem:
    """One mistake in a settings dict: where (a dotted key path), what, and its code."""

    path: str
    message: str
    code: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def describe(problems: Collection[Problem]) -> str:
    """The message of a ``ConfigurationError``: every problem on a line of its own."""
    if len(problems) == 1:
        return str(next(iter(problems)))
    return f"{len(problems)} problems in the settings:\n" + "\n".join(
        f"  {problem}" for problem in problems
    )


# -- small checks that add problems --------------------------------------------------------


def _at(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _type_name(value: object) -> str:
    return type(value).__name__


class _Report:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str, code: str) -> None:
        self.problems.append(Problem(path, message, code))

    def mapping(self, path: str, value: object, what: str) -> Mapping[Any, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.add(path, f"{what} must be a dict, got {_type_name(value)} {value!r}", E_TYPE)
        return None

    def keys(self, path: str, config: Mapping[Any, Any], allowed: Collection[str]) -> None:
        for key in config:
            if key in allowed:
                continue
            near = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; allowed: {sorted(allowed)}"
            self.add(_at(path, key), f"unknown key {key!r}{hint}", E_UNKNOWN_KEY)

    def flag(self, path: str, value: object) -> None:
        if not isinstance(value, bool):
            self.add(path, f"must be True or False, got {value!r}", E_TYPE)

    def text(self, path: str, value: object, what: str = "a string") -> bool:
        if isinstance(value, str) and value:
            return True
        self.add(path, f"must be {what}, got {value!r}", E_TYPE)
        return False

    def call(self, path: str, code: str, checker: Callable[[], object]) -> bool:
        """Run a core checker; a TypeError is a type problem, a ValueError ``code``."""
        try:
            checker()
        except TypeError as exc:
            self.add(path, str(exc), E_TYPE)
        except (ValueError, OverflowError) as exc:
            self.add(path, str(exc), code)
        else:
            return True
        return False


# -- the whole dict --------------------------------------------------------------------------


def validate(settings: object, *, now_ms: int | None = None) -> list[Problem]:
    """Every problem of a settings dict (``UID_FIELDS``); an empty list when it is sound.

    Pure: builds no generator, claims no lease, opens no connection.
    """
    return _validate(settings, now_ms=now_ms, database_leases=True)


def _validate(settings: object, *, now_ms: int | None, database_leases: bool) -> list[Problem]:
    report = _Report()
    if not isinstance(settings, Mapping):
        report.add(
            "",
            f"the settings must be a dict of {sorted(TOP_LEVEL)}, got {_type_name(settings)}",
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
    generators = report.mapping("GENERATORS", settings.get("GENERATORS", {}), "GENERATORS")
    for name, config in (generators or {}).items():
        report.problems.extend(
            generator_problems(name, config, now_ms=now_ms, database_leases=database_leases)
        )
    shards = report.mapping("SHARDS", settings.get("SHARDS", {}), "SHARDS")
    for name, config in (shards or {}).items():
        report.problems.extend(shard_map_problems(name, config))
    return report.problems


# -- generators ------------------------------------------------------------------------------


def generator_problems(
    name: object, config: object, *, now_ms: int | None = None, database_leases: bool = True
) -> list[Problem]:
    """The problems of one ``GENERATORS`` entry (paths start ``GENERATORS.<name>``)."""
    report = _Report()
    path = _at("GENERATORS", name)
    if not isinstance(name, str) or not name:
        report.add(path, f"generator names must be non-empty strings, got {name!r}", E_TYPE)
    entry = report.mapping(path, config, f"generator {name!r}")
    if entry is None:
        return report.problems
    kind = entry.get("kind")
    if kind not in KINDS:
        wrong = "is required" if "kind" not in entry else f"got {kind!r}"
        report.add(_at(path, "kind"), f"kind must be one of {list(KINDS)}; {wrong}", E_GENERATOR)
        return report.problems
    report.keys(path, entry, GENERATOR_KEYS[kind])
    if "max_backward_ms" in entry:
        report.call(
            _at(path, "max_backward_ms"),
            E_TYPE,
            lambda: check.non_negative_number("max_backward_ms", entry["max_backward_ms"]),
        )
    if "max_ahead_ms" in entry and entry["max_ahead_ms"] is not None:
        report.call(
            _at(path, "max_ahead_ms"),
            E_TYPE,
            lambda: check.integer("max_ahead_ms", entry["max_ahead_ms"], 1, 10**12),
        )
    language = entry.get("next_id_language", NEXT_ID_LANGUAGES[0])
    if language not in NEXT_ID_LANGUAGES:
        report.add(
            _at(path, "next_id_language"),
            f"must be one of {list(NEXT_ID_LANGUAGES)}, got {language!r}",
            E_GENERATOR,
        )
    layout = None
    if kind in _DEFAULT_LAYOUT:
        layout = _layout_problems(report, path, entry, kind, now_ms)
    elif kind == "locality":
        if "sequential" in entry:
            report.flag(_at(path, "sequential"), entry["sequential"])
        if entry.get("pid") is not None:
            report.call(
                _at(path, "pid"), E_GENERATOR, lambda: check.integer("pid", entry["pid"], 0, 65535)
            )
        if entry.get("mac") is not None:
            report.call(_at(path, "mac"), E_GENERATOR, lambda: mac_bits(entry["mac"]))
    elif kind == "uniqid" and "total_shards" in entry:
        report.call(
            _at(path, "total_shards"),
            E_GENERATOR,
            lambda: check.integer("total_shards", entry["total_shards"], 1, 10),
        )
    _fields_problems(report, path, entry, kind, layout, database_leases)
    if "sequence" in entry and entry["sequence"] is not None:
        _sequence_problems(report, _at(path, "sequence"), entry["sequence"])
    if "single_process" in entry:
        report.flag(_at(path, "single_process"), entry["single_process"])
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
            _at("GENERATORS", name),
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


def _sequence_problems(report: _Report, path: str, spec: object) -> None:
    entry = report.mapping(path, spec, "a sequence")
    if entry is None:
        return
    report.keys(path, entry, SEQUENCE_KEYS)
    url = entry.get("redis")
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        report.add(_at(path, "redis"), f"a redis:// URL is required, got {url!r}", E_TYPE)
    if "key_ttl_ms" in entry:
        report.call(
            _at(path, "key_ttl_ms"),
            E_TYPE,
            lambda: check.integer("key_ttl_ms", entry["key_ttl_ms"], 1),
        )
    if "prefix" in entry and not isinstance(entry["prefix"], str):
        report.add(_at(path, "prefix"), "prefix must be a string", E_TYPE)
    if "mode" in entry and entry["mode"] not in SEQUENCE_MODES:
        report.add(
            _at(path, "mode"),
            f"mode must be one of {', '.join(SEQUENCE_MODES)}, got {entry['mode']!r}",
            E_TYPE,
        )


def _layout_problems(
    report: _Report, path: str, entry: Mapping[str, Any], kind: str, now_ms: int | None
) -> IntLayout | None:
    found = len(report.problems)
    for key in ("unsigned",):
        if key in entry:
            report.flag(_at(path, key), entry[key])
    spec = entry.get("layout", _DEFAULT_LAYOUT[kind])
    cls = DecimalLayout if kind == "decimal" else SnowflakeLayout
    if isinstance(spec, Mapping):
        report.keys(_at(path, "layout"), spec, _LAYOUT_KEYS[cls])
    elif isinstance(spec, str):
        if spec not in PRESETS:
            report.add(
                _at(path, "layout"),
                f"unknown layout {spec!r}; choose one of {sorted(PRESETS)}",
                E_GENERATOR,
            )
    else:
        report.add(
            _at(path, "layout"),
            f"layout must be a preset name or a dict of layout parameters, got {spec!r}",
            E_TYPE,
        )
    if "epoch" in entry:
        report.call(_at(path, "epoch"), E_GENERATOR, lambda: parse_instant(entry["epoch"]))
    if len(report.problems) > found:
        return None
    layout: IntLayout | None = None

    def make() -> None:
        nonlocal layout
        layout = build_layout(entry, kind)

    if not report.call(_at(path, "layout"), E_GENERATOR, make) or layout is None:
        return None
    if not isinstance(layout, cls):
        report.add(
            _at(path, "layout"),
            f"a {kind} generator needs a {'decimal' if cls is DecimalLayout else 'bit'} "
            f"layout, not {layout!r}",
            E_GENERATOR,
        )
        return None
    now = _now_ms() if now_ms is None else now_ms
    if layout.epoch_ms > now:
        report.add(
            _at(path, "epoch" if "epoch" in entry else "layout"),
            f"epoch {format_ms(layout.epoch_ms)} is in the future (now is {format_ms(now)}): "
            "ids before it cannot be represented",
            E_GENERATOR,
        )
    if kind == "sharded":
        assert isinstance(layout, SnowflakeLayout)
        shard_field = entry.get("shard_field", "shard")
        named = report.text(_at(path, "shard_field"), shard_field, "a field name")
        if named and shard_field not in layout.field_names:
            report.add(
                _at(path, "shard_field"),
                f"layout has no {shard_field!r} field to carry the shard; its fields "
                f"are {list(layout.field_names)}",
                E_GENERATOR,
            )
        if entry.get("key_hash", "modulo") not in ("modulo", "mixed"):
            report.add(
                _at(path, "key_hash"),
                f"key_hash must be 'modulo' or 'mixed', got {entry['key_hash']!r}",
                E_GENERATOR,
            )
    return layout


def _node_fields(kind: str, entry: Mapping[str, Any], layout: IntLayout | None) -> set[str]:
    """The node fields a generator of this entry takes a value for."""
    if kind == "decimal":
        return {"server"}
    if isinstance(layout, SnowflakeLayout):
        names = set(layout.field_names)
        if kind == "sharded":
            names.discard(entry.get("shard_field", "shard"))
        return names
    return set()


def _fields_problems(
    report: _Report,
    path: str,
    entry: Mapping[str, Any],
    kind: str,
    layout: IntLayout | None,
    database_leases: bool,
) -> None:
    fields = report.mapping(_at(path, "fields"), entry.get("fields", {}), "fields")
    if fields is None:
        return
    if kind in _DEFAULT_LAYOUT and layout is None:
        return  # the layout's own problem is reported; its fields are unknown
    allowed = _node_fields(kind, entry, layout)
    extra = sorted(str(name) for name in fields if name not in allowed)
    if extra:
        if kind == "sharded" and entry.get("shard_field", "shard") in fields:
            what = f"{entry.get('shard_field', 'shard')!r} is chosen per id, not configured; "
        else:
            what = ""
        takes = "only " + ", ".join(sorted(allowed)) if allowed else "no"
        report.add(
            _at(path, "fields"),
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
            at = _at(_at(path, "fields"), field)
            _node_problems(report, at, field, value, maximum, database_leases)


def _node_problems(
    report: _Report,
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
            f"{{'lease': 'redis' | 'database', ...}}, got {value!r}",
            E_TYPE,
        )
    elif isinstance(value, int):
        report.call(path, E_GENERATOR, lambda: check.in_range(field, value, maximum))
    elif "env" in value:
        report.keys(path, value, ("env",))
        report.text(_at(path, "env"), value["env"], "the name of an environment variable")
    elif "lease" in value:
        _lease_problems(report, path, field, value, database_leases)
    else:
        report.add(
            path,
            f"unknown source for field {field!r}: {dict(value)!r} (use an int, "
            "{'env': 'VAR'} or {'lease': 'redis' | 'database', ...})",
            E_GENERATOR,
        )


def _lease_problems(
    report: _Report, path: str, field: str, lease: Mapping[str, Any], database_leases: bool
) -> None:
    kind = lease["lease"]
    if kind not in LEASE_KEYS:
        report.add(
            _at(path, "lease"),
            f"the {field!r} lease must be 'redis' or 'database', got {kind!r}",
            E_GENERATOR,
        )
        return
    report.keys(path, lease, LEASE_KEYS[kind])
    name = lease.get("name")
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        report.add(
            _at(path, "name"),
            f"the {field!r} lease needs a 'name' (the id space shared by the processes that "
            f"must not collide): a string without spaces, got {name!r}",
            E_GENERATOR,
        )
        name = "valid"
    try:
        check_ttl(name, lease.get("ttl", 10.0), lease.get("margin"))
    except (TypeError, ValueError) as exc:
        key = "margin" if str(exc).startswith("margin") else "ttl"
        code = E_TYPE if isinstance(exc, TypeError) else E_GENERATOR
        report.add(_at(path, key), str(exc), code)
    if kind == "redis":
        if not isinstance(lease.get("url"), str):
            report.add(
                _at(path, "url"),
                f"the {field!r} Redis lease needs a 'url' (redis://host:port/db)",
                E_GENERATOR,
            )
        if "prefix" in lease:
            report.text(_at(path, "prefix"), lease["prefix"])
    else:
        if "database" in lease:
            report.text(_at(path, "database"), lease["database"], "a database name")
        if not database_leases:
            report.add(
                path,
                "a database lease needs the connections of an ORM: pass database_lease= "
                "(uid_fields.sqlalchemy.lease_factory({name: engine}), for one)",
                E_GENERATOR,
            )


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def build_layout(config: Mapping[str, Any], kind: str | None = None) -> IntLayout:
    """The layout of a generator entry: its preset or dict, with ``epoch``/``unsigned``.

    A pure value: making it claims nothing, so checks can read lifetimes from it.
    """
    kind = kind if kind is not None else config.get("kind", "snowflake")
    spec = config.get("layout", _DEFAULT_LAYOUT.get(str(kind), "twitter"))
    if isinstance(spec, str):
        try:
            layout = PRESETS[spec]
        except KeyError:
            raise ValueError(f"unknown layout {spec!r}; choose one of {sorted(PRESETS)}") from None
    elif isinstance(spec, Mapping):
        params = dict(spec)
        params.setdefault("epoch_ms", 0)
        for key in ("fields", "low_fields"):
            if key in params:
                params[key] = tuple(tuple(f) for f in params[key])
        cls = DecimalLayout if kind == "decimal" else SnowflakeLayout
        layout = cls(**params)
    else:
        raise TypeError(f"layout must be a name or a dict of layout parameters, got {spec!r}")
    changes: dict[str, Any] = {}
    if "epoch" in config:
        changes["epoch_ms"] = parse_instant(config["epoch"])
    if "unsigned" in config:
        changes["unsigned"] = bool(config["unsigned"])
    return layout.replace(**changes) if changes else layout


def layout_of(config: Mapping[str, Any]) -> IntLayout | None:
    """The layout of a valid generator entry; None for kinds without one."""
    kind = config.get("kind")
    return build_layout(config, str(kind)) if kind in _DEFAULT_LAYOUT else None


def static_node(config: Mapping[str, Any]) -> dict[str, int] | None:
    """Every node value of a valid entry when all are fixed ints (missing ones are 0);
    None when one comes from the environment or a lease, which cannot be compared."""
    kind = str(config.get("kind"))
    given = dict(config.get("fields", {}))
    if any(isinstance(value, Mapping) for value in given.values()):
        return None
    node = dict.fromkeys(_node_fields(kind, config, layout_of(config)), 0)
    node.update(given)
    return node


def _node_source(config: object, database_lease: DatabaseLeaseFactory | None) -> NodeValue:
    if not isinstance(config, Mapping):
        return config  # type: ignore[return-value]  # an int (validated)
    if "env" in config:
        return FromEnv(config["env"])
    ttl = config.get("ttl", 10.0)
    margin = config.get("margin")
    if config["lease"] == "redis":
        return RedisLease(
            config["url"],
            config["name"],
            ttl,
            margin=margin,
            prefix=config.get("prefix", "uid_fields:lease:"),
        )
    assert database_lease is not None  # validated
    return database_lease(
        config["name"], ttl, database=config.get("database", "default"), margin=margin
    )


def build_generator(
    name: str,
    config: object,
    *,
    database_lease: DatabaseLeaseFactory | None = None,
) -> Generator:
    """The generator a ``GENERATORS`` entry describes.

    ``ConfigurationError`` names every wrong key. Making the generator claims its
    leases: call this once per name and process (``UidConfig`` and Django do).
    """
    problems = generator_problems(name, config, database_leases=database_lease is not None)
    if problems:
        raise ConfigurationError(describe(problems))
    assert isinstance(config, Mapping)
    kind = config["kind"]
    options: dict[str, Any] = {}
    if "max_backward_ms" in config:
        options["max_backward_ms"] = config["max_backward_ms"]
    fields: dict[str, Any] = {
        k: _node_source(v, database_lease) for k, v in config.get("fields", {}).items()
    }
    if config.get("sequence") is not None:
        spec = config["sequence"]
        options["sequence"] = RedisSequence(
            spec["redis"],
            mode=spec.get("mode", "uid_fields"),
            prefix=spec.get("prefix"),
            key_ttl_ms=spec.get("key_ttl_ms", 10_000),
        )
    if kind == "locality":
        return LocalityUUIDGenerator(
            sequential=config.get("sequential", False),
            pid=config.get("pid"),
            mac=config.get("mac"),
        )
    if kind == "uniqid":
        return UniqIdGenerator(config.get("total_shards", 4), **options)
    if kind == "decimal":
        options.pop("sequence", None)  # not a key of decimal generators (validated above)
    layout = build_layout(config, kind)
    if isinstance(layout, DecimalLayout):
        return DecimalGenerator(layout, server=fields.pop("server", 0), **options)
    assert isinstance(layout, SnowflakeLayout)
    if kind == "sharded":
        return ShardedIdGenerator(
            layout,
            shard_field=config.get("shard_field", "shard"),
            key_hash=config.get("key_hash"),
            **options,
            **fields,
        )
    return SnowflakeGenerator(layout, **options, **fields)


# -- shard maps ------------------------------------------------------------------------------


def shard_map_problems(name: object, config: object) -> list[Problem]:
    """The problems of one ``SHARDS`` entry that do not depend on a generator."""
    report = _Report()
    path = _at("SHARDS", name)
    entry = report.mapping(path, config, f"shard map {name!r}")
    if entry is None:
        return report.problems
    report.keys(path, entry, SHARD_MAP_KEYS)
    if ("databases" in entry) == ("ranges" in entry):
        report.add(
            path,
            "give either 'databases' (logical shards spread evenly) or 'ranges' "
            "({alias: [start, stop]})" + (", not both" if "databases" in entry else ""),
            E_SHARD_MAP,
        )
    if "databases" in entry and isinstance(entry["databases"], Mapping):
        # {"shard_0": {"primary": "shard_0", "replicas": [...]}, ...}: the aliases in
        # order, each with its read replicas (checked with "replicas" below)
        at = _at(path, "databases")
        for alias in entry["databases"]:
            report.text(_at(at, alias), alias, "a database alias")
        if not entry["databases"]:
            report.add(at, "must name at least one database", E_SHARD_MAP)
    elif "databases" in entry:
        databases = entry["databases"]
        at = _at(path, "databases")
        if isinstance(databases, str) or not isinstance(databases, (list, tuple)):
            report.add(at, f"must be a list of database aliases, got {databases!r}", E_TYPE)
        else:
            for index, alias in enumerate(databases):
                report.text(_at(at, index), alias, "a database alias")
            if not databases:
                report.add(at, "must name at least one database", E_SHARD_MAP)
            elif len(set(map(str, databases))) != len(databases):
                report.add(at, f"duplicate database aliases in {list(databases)}", E_SHARD_MAP)
    if "ranges" in entry:
        ranges = report.mapping(_at(path, "ranges"), entry["ranges"], "ranges")
        for alias, span in (ranges or {}).items():
            at = _at(_at(path, "ranges"), alias)
            if (
                not isinstance(span, (list, tuple))
                or len(span) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) for x in span)
            ):
                report.add(at, f"must be [start, stop] (two ints), got {span!r}", E_TYPE)
            elif not 0 <= span[0] < span[1]:
                report.add(at, f"range {span[0]}..{span[1]} is empty or negative", E_SHARD_MAP)
    if "logical_shards" in entry:
        report.call(
            _at(path, "logical_shards"),
            E_SHARD_MAP,
            lambda: check.integer("logical_shards", entry["logical_shards"], 1),
        )
    if "route_by" in entry:
        report.text(_at(path, "route_by"), entry["route_by"], "a node field name")
    if "closed" in entry:
        _closed_problems(report, _at(path, "closed"), entry)
    if "replicas" in entry or isinstance(entry.get("databases"), Mapping):
        try:
            replicas_of(entry)
        except (TypeError, ValueError) as exc:
            where = "replicas" if "replicas" in entry else "databases"
            report.add(_at(path, where), str(exc), E_TYPE)
    if "incoming" in entry:
        at = _at(path, "incoming")
        for index, alias in enumerate(_alias_list(report, at, entry["incoming"])):
            report.text(_at(at, index), alias, "a database alias")
    return report.problems


def _alias_list(report: _Report, at: str, value: object) -> list[Any]:
    """``value`` if it is a list of database aliases (E014 and ``[]`` otherwise)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        report.add(at, f"must be a list of database aliases, got {value!r}", E_TYPE)
        return []
    return list(value)


def map_databases(entry: Mapping[str, Any]) -> list[str] | None:
    """The aliases that own logical shards in a ``SHARDS`` entry, in order, whichever
    form names them (a ``databases`` list or dict, ``ranges``); None when malformed."""
    ranges, databases = entry.get("ranges"), entry.get("databases")
    found = ranges if isinstance(ranges, Mapping) else databases
    if isinstance(found, str) or not isinstance(found, (Mapping, list, tuple)):
        return None
    return [alias for alias in found if isinstance(alias, str)]


def shard_map_aliases(entry: Mapping[str, Any], *, replicas: bool = False) -> list[str]:
    """Every alias a ``SHARDS`` entry names: the databases that own logical shards and
    the incoming ones (both are migrated), and with ``replicas`` their read replicas."""
    incoming = entry.get("incoming", ())
    aliases = [*(map_databases(entry) or ())]
    if isinstance(incoming, (list, tuple)):
        aliases += [alias for alias in incoming if isinstance(alias, str)]
    if replicas:
        with suppress(TypeError, ValueError):  # a malformed "replicas" is E014
            aliases += [r for found in replicas_of(entry).values() for r in found]
    return list(dict.fromkeys(aliases))


def replicas_of(entry: Mapping[str, Any]) -> dict[str, list[str]]:
    """The read replicas a ``SHARDS`` entry names, primary -> replica aliases.

    ``"replicas": {"shard_1": ["shard_1_r1"]}``, or with each database of the map
    described as ``{"primary": "shard_1", "replicas": ["shard_1_r1"]}`` (under
    ``"replicas"``, or as the values of a ``"databases"`` dict); the primary is the
    database of the map (writes never move). ``TypeError``/``ValueError`` describe a
    malformed one.
    """
    value = entry.get("replicas", {})
    if not isinstance(value, Mapping):
        raise TypeError(f"must be a dict of database alias -> replica aliases, got {value!r}")
    databases = entry.get("databases")
    known = set(map_databases(entry) or ())
    specs = list(value.items())
    if isinstance(databases, Mapping):
        specs += [(alias, spec or []) for alias, spec in databases.items()]
    found: dict[str, list[str]] = {}
    for alias, spec in specs:
        if isinstance(spec, Mapping):
            extra = sorted(set(spec) - {"primary", "replicas"})
            if extra:
                raise ValueError(f"{alias}: unknown keys {extra} (primary, replicas)")
            if spec.get("primary", alias) != alias:
                raise ValueError(
                    f"{alias}: the primary must be {alias!r} itself (the map's database "
                    f"takes the writes), got {spec.get('primary')!r}"
                )
            spec = spec.get("replicas", [])
        if isinstance(spec, str) or not isinstance(spec, (list, tuple)):
            raise TypeError(f"{alias}: replicas must be a list of aliases, got {spec!r}")
        if alias not in known:
            raise ValueError(f"{alias!r} is not a database of this map")
        for replica in spec:
            if not isinstance(replica, str) or not replica:
                raise TypeError(f"{alias}: a replica must be a database alias, got {replica!r}")
            if replica == alias or replica in known:
                raise ValueError(f"{alias}: {replica!r} is a database of the map, not a replica")
        found[alias] = list(dict.fromkeys([*found.get(alias, []), *spec]))
    return {alias: replicas for alias, replicas in found.items() if replicas}


def _closed_problems(report: _Report, at: str, entry: Mapping[str, Any]) -> None:
    closed = _alias_list(report, at, entry["closed"])
    known = map_databases(entry)
    if not closed or known is None:
        return  # reported above (or nothing closed)
    unknown = [alias for alias in closed if alias not in known]
    if unknown:
        report.add(at, f"names databases not in this map: {unknown}", E_SHARD_MAP)
    elif set(known) <= set(closed):
        report.add(at, "closes every database: new rows would have nowhere to go", E_SHARD_MAP)


def _shard_map(config: Mapping[str, Any], route: Route) -> ShardMap:
    ranges = config.get("ranges")
    return ShardMap(
        None if ranges else list(config.get("databases", [])),
        route=route,
        ranges={alias: (span[0], span[1]) for alias, span in ranges.items()} if ranges else None,
        closed=config.get("closed", ()),
        incoming=config.get("incoming", ()),
    )


def build_shard_map(config: Mapping[str, Any], generator: object) -> ShardMap:
    """The shard map a ``SHARDS`` entry describes, as ``generator``'s ids route through it."""
    problems = shard_map_problems("", config)
    if problems:
        raise ConfigurationError(describe(problems))
    route = route_for(
        generator,
        by=config.get("route_by"),
        logical_shards=config.get("logical_shards", 1024),
    )
    return _shard_map(config, route)


def route_of(generator_config: Mapping[str, Any], shards_config: Mapping[str, Any]) -> Route:
    """The route of a valid generator entry's ids through a shard map entry, from the
    dicts alone: what ``route_for`` gives for the built generator, with no generator
    (so no lease) made. Checks use it; a test holds the two to the same answer."""
    layout = layout_of(generator_config)
    return natural_route(
        generator_config["kind"],
        layout if isinstance(layout, IntLayout) else None,
        by=shards_config.get("route_by"),
        logical_shards=shards_config.get("logical_shards", 1024),
        shard_field=generator_config.get("shard_field", "shard"),
        total_shards=generator_config.get("total_shards", 4),
    )


def shard_map_of(shards_config: Mapping[str, Any], generator_config: Mapping[str, Any]) -> ShardMap:
    """The shard map of two valid entries, from the dicts alone (no generator made);
    ValueError/TypeError when they do not fit (ranges that miss logical shards, ...)."""
    return _shard_map(shards_config, route_of(generator_config, shards_config))


# -- built once per name ---------------------------------------------------------------------

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V], Generic[K, V]):
    """A dict whose missing values are built once, under a lock.

    One generator per name per process: two generators of one name would each start
    their sequence at 0 and repeat each other's ids.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def build(self, key: K, make: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            with self._lock:
                value = self.get(key)
                if value is None:
                    value = make()
                    self[key] = value
        return value


class UidConfig:
    """Generators and shard maps from one settings dict, for SQLAlchemy and plain Python.

    ``config = UidConfig(UID_FIELDS)`` validates the whole dict at once and raises
    ``ConfigurationError`` naming every wrong key. ``config.generator("orders")`` builds
    a generator on first use (claiming its leases then, not before) and returns the
    same object afterwards; ``config.shard_map("main", "orders")`` routes that
    generator's ids. A ``{"lease": "database", "database": "<name>"}`` node value
    needs ``database_lease=``, for example
    ``uid_fields.sqlalchemy.lease_factory({"default": engine})``.
    """

    def __init__(
        self,
        settings: object,
        *,
        database_lease: DatabaseLeaseFactory | None = None,
    ) -> None:
        problems = _validate(settings, now_ms=None, database_leases=database_lease is not None)
        if problems:
            raise ConfigurationError(describe(problems))
        assert isinstance(settings, Mapping)
        self.settings: Mapping[str, Any] = settings
        self._database_lease = database_lease
        self._generators: Memo[str, Generator] = Memo()
        self._shard_maps: Memo[tuple[str, str], ShardMap] = Memo()

    def _entry(self, section: str, name: str) -> Mapping[str, Any]:
        entries: Mapping[str, Mapping[str, Any]] = self.settings.get(section, {})
        try:
            return entries[name]
        except KeyError:
            raise ConfigurationError(
                f"{section}.{name}: no such entry (configured: {sorted(entries)})"
            ) from None

    def generator(self, name: str) -> Generator:
        """The process-wide generator of ``GENERATORS[name]``.

        A sharded generator whose ids would collide across processes (E016) is refused:
        built here it makes ids in Python.
        """
        problems = process_problems(name, self._entry("GENERATORS", name))
        if problems:
            raise ConfigurationError(describe(problems))
        return self._generators.build(
            name,
            lambda: build_generator(
                name, self._entry("GENERATORS", name), database_lease=self._database_lease
            ),
        )

    def shard_map(self, shards: str, generator: str) -> ShardMap:
        """The shard map ``SHARDS[shards]`` as the ids of generator ``generator`` route."""

        def make() -> ShardMap:
            config = self._entry("SHARDS", shards)
            try:
                return shard_map_of(config, self._entry("GENERATORS", generator))
            except (ValueError, TypeError) as exc:
                if isinstance(exc, ConfigurationError):
                    raise
                raise ConfigurationError(
                    f"SHARDS.{shards}: does not fit the ids of generator {generator!r}: {exc}"
                ) from exc

        return self._shard_maps.build((shards, generator), make)

    def __repr__(self) -> str:
        generators = sorted(self.settings.get("GENERATORS", {}))
        shards = sorted(self.settings.get("SHARDS", {}))
        return f"<UidConfig generators={generators} shards={shards}>"
