"""The ``SHARDS`` section: a map's problems, its databases, replicas, closed and incoming
aliases, and the shard map built for a generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from .._internal import validate as check
from .._internal.validate import shown
from ..errors import ConfigurationError
from ..ids.layouts import IntLayout
from ..placement import Route, ShardMap, natural_route, route_for
from ..placement.shards import MAX_LOGICAL_SHARDS
from .layouts import layout_of
from .problems import (
    E_SHARD_MAP,
    E_TYPE,
    Problem,
    Report,
    describe,
    key_names,
    key_path,
    key_text,
)

SHARD_MAP_KEYS = frozenset(
    {"databases", "ranges", "logical_shards", "route_by", "closed", "incoming", "replicas"}
)


def shard_map_problems(name: object, config: object) -> list[Problem]:
    """The problems of one ``SHARDS`` entry that do not depend on a generator."""
    report = Report()
    path = key_path("SHARDS", name)
    if not isinstance(name, str):  # UidConfig and the checks sort and look names up
        report.add(path, f"shard map names must be strings, got {shown(name)}", E_TYPE)
    entry = report.mapping(path, config, f"shard map {shown(name)}")
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
        at = key_path(path, "databases")
        for alias in entry["databases"]:
            report.text(key_path(at, alias), alias, "a database alias")
        if not entry["databases"]:
            report.add(at, "must name at least one database", E_SHARD_MAP)
    elif "databases" in entry:
        databases = entry["databases"]
        at = key_path(path, "databases")
        if isinstance(databases, str) or not isinstance(databases, (list, tuple)):
            report.add(at, f"must be a list of database aliases, got {shown(databases)}", E_TYPE)
        else:
            named = all(  # a list, not a generator: every alias wrong is reported
                [
                    report.text(key_path(at, i), a, "a database alias")
                    for i, a in enumerate(databases)
                ]
            )
            if not databases:
                report.add(at, "must name at least one database", E_SHARD_MAP)
            elif named and len(set(databases)) != len(databases):
                report.add(
                    at, f"duplicate database aliases in {shown(list(databases))}", E_SHARD_MAP
                )
    if "ranges" in entry:
        ranges = report.mapping(key_path(path, "ranges"), entry["ranges"], "ranges")
        for alias, span in (ranges or {}).items():
            at = key_path(key_path(path, "ranges"), alias)
            if not isinstance(alias, str) or not alias:
                report.add(at, f"must be keyed by a database alias, not {shown(alias)}", E_TYPE)
            elif (
                not isinstance(span, (list, tuple))
                or len(span) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) for x in span)
            ):
                report.add(at, f"must be [start, stop] (two ints), got {shown(span)}", E_TYPE)
            elif not 0 <= span[0] < span[1]:
                report.add(
                    at,
                    f"range {shown(span[0])}..{shown(span[1])} is empty or negative",
                    E_SHARD_MAP,
                )
            elif span[1] > MAX_LOGICAL_SHARDS:
                report.add(
                    at,
                    f"range {shown(span[0])}..{shown(span[1])} ends past the {MAX_LOGICAL_SHARDS} "
                    "logical shards a shard map holds",
                    E_SHARD_MAP,
                )
    if "logical_shards" in entry:
        report.call(
            key_path(path, "logical_shards"),
            E_SHARD_MAP,
            lambda: check.integer("logical_shards", entry["logical_shards"], 1, MAX_LOGICAL_SHARDS),
        )
    if "route_by" in entry:
        report.text(key_path(path, "route_by"), entry["route_by"], "a node field name")
    if "closed" in entry:
        _closed_problems(report, key_path(path, "closed"), entry)
    if "replicas" in entry or isinstance(entry.get("databases"), Mapping):
        try:
            replicas_of(entry)
        except (TypeError, ValueError) as exc:
            where = "replicas" if "replicas" in entry else "databases"
            report.add(key_path(path, where), str(exc), E_TYPE)
    if "incoming" in entry:
        at = key_path(path, "incoming")
        for index, alias in enumerate(_alias_list(report, at, entry["incoming"])):
            report.text(key_path(at, index), alias, "a database alias")
    return report.problems


def _alias_list(report: Report, at: str, value: object) -> list[Any]:
    """``value`` if it is a list of database aliases (E014 and ``[]`` otherwise)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        report.add(at, f"must be a list of database aliases, got {shown(value)}", E_TYPE)
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
        raise TypeError(f"must be a dict of database alias -> replica aliases, got {shown(value)}")
    databases = entry.get("databases")
    known = set(map_databases(entry) or ())
    specs = list(value.items())
    if isinstance(databases, Mapping):
        specs += [(alias, spec or []) for alias, spec in databases.items()]
    found: dict[str, list[str]] = {}
    for alias, spec in specs:
        at = key_text(alias)
        if isinstance(spec, Mapping):
            extra = key_names(key for key in spec if key not in ("primary", "replicas"))
            if extra:
                raise ValueError(f"{at}: unknown keys {extra} (primary, replicas)")
            if spec.get("primary", alias) != alias:
                raise ValueError(
                    f"{at}: the primary must be {shown(alias)} itself (the map's database "
                    f"takes the writes), got {shown(spec.get('primary'))}"
                )
            spec = spec.get("replicas", [])
        if isinstance(spec, str) or not isinstance(spec, (list, tuple)):
            raise TypeError(f"{at}: replicas must be a list of aliases, got {shown(spec)}")
        if not isinstance(alias, str) or alias not in known:
            raise ValueError(f"{shown(alias)} is not a database of this map")
        for replica in spec:
            if not isinstance(replica, str) or not replica:
                raise TypeError(f"{at}: a replica must be a database alias, got {shown(replica)}")
            if replica == alias or replica in known:
                raise ValueError(f"{at}: {replica!r} is a database of the map, not a replica")
        found[alias] = list(dict.fromkeys([*found.get(alias, []), *spec]))
    return {alias: replicas for alias, replicas in found.items() if replicas}


def _closed_problems(report: Report, at: str, entry: Mapping[str, Any]) -> None:
    closed = _alias_list(report, at, entry["closed"])
    known = map_databases(entry)
    if not closed or known is None:
        return  # reported above (or nothing closed)
    unknown = [alias for alias in closed if alias not in known]
    if unknown:
        report.add(at, f"names databases not in this map: {shown(unknown)}", E_SHARD_MAP)
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
