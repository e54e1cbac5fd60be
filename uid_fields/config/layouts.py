"""The layout an entry of ``GENERATORS`` names (a preset, a custom dict, an epoch) and
the node values fixed in the entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._internal.timeutil import parse_epoch
from .._internal.validate import shown
from ..ids.layouts import PRESETS, DecimalLayout, IntLayout, SnowflakeLayout

DEFAULT_LAYOUT = {"snowflake": "twitter", "sharded": "instagram", "decimal": "decimal"}


LAYOUT_KEYS: dict[type[IntLayout], frozenset[str]] = {
    SnowflakeLayout: frozenset(
        {"epoch_ms", "fields", "time_bits", "sequence_bits", "time_unit_ms", "low_fields"}
        | {"unsigned", "name"}
    ),
    DecimalLayout: frozenset(
        {"epoch_ms", "time_digits", "random_digits", "server_digits", "time_unit_ms"}
        | {"unsigned", "name"}
    ),
}


def shard_field_of(entry: Mapping[str, Any]) -> str | None:
    """The field a sharded entry's ids carry their shard in (``shard`` unless named);
    None when ``shard_field`` is no string, which validation reports: it is compared
    with field names, and a list or a dict would raise TypeError in a set or dict."""
    field = entry.get("shard_field", "shard")
    return field if isinstance(field, str) else None


def node_fields(kind: str, entry: Mapping[str, Any], layout: IntLayout | None) -> set[str]:
    """The node fields a generator of this entry takes a value for."""
    if kind == "decimal":
        return {"server"}
    if isinstance(layout, SnowflakeLayout):
        names = set(layout.field_names)
        if kind == "sharded":
            names.discard(shard_field_of(entry) or "")
        return names
    return set()


def build_layout(config: Mapping[str, Any], kind: str | None = None) -> IntLayout:
    """The layout of a generator entry: its preset or dict, with ``epoch``/``unsigned``.

    A pure value: making it claims nothing, so checks can read lifetimes from it.
    """
    kind = kind if kind is not None else config.get("kind", "snowflake")
    spec = config.get("layout", DEFAULT_LAYOUT.get(str(kind), "twitter"))
    if isinstance(spec, str):
        try:
            layout = PRESETS[spec]
        except KeyError:
            raise ValueError(
                f"unknown layout {shown(spec)}; choose one of {sorted(PRESETS)}"
            ) from None
    elif isinstance(spec, Mapping):
        params = dict(spec)
        params.setdefault("epoch_ms", 0)
        for key in ("fields", "low_fields"):
            if key in params:
                params[key] = tuple(tuple(f) for f in params[key])
        cls = DecimalLayout if kind == "decimal" else SnowflakeLayout
        layout = cls(**params)
    else:
        raise TypeError(f"layout must be a name or a dict of layout parameters, got {shown(spec)}")
    changes: dict[str, Any] = {}
    if "epoch" in config:
        changes["epoch_ms"] = parse_epoch(config["epoch"])
    if "unsigned" in config:
        changes["unsigned"] = bool(config["unsigned"])
    return layout.replace(**changes) if changes else layout


def layout_of(config: Mapping[str, Any]) -> IntLayout | None:
    """The layout of a valid generator entry; None for kinds without one."""
    kind = config.get("kind")
    return build_layout(config, str(kind)) if kind in DEFAULT_LAYOUT else None


def static_node(config: Mapping[str, Any]) -> dict[str, int] | None:
    """Every node value of a valid entry when all are fixed ints (missing ones are 0);
    None when one comes from the environment or a lease, which cannot be compared."""
    kind = str(config.get("kind"))
    given = dict(config.get("fields", {}))
    if any(isinstance(value, Mapping) for value in given.values()):
        return None
    node = dict.fromkeys(node_fields(kind, config, layout_of(config)), 0)
    node.update(given)
    return node
