"""Hypothesis strategies for settings values: anything a settings file could hold.

Shared by the core validator's tests and Django's checks tests, which assert that any
value at all is reported as problems and never raises.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from uid_fields.config.schema import GENERATOR_KEYS

HUGE = 10**5000  # more digits than Python turns into a string (sys.int_info)

#: Names the validator knows, so that generated dicts reach the checks behind the keys.
WORDS = [
    *("GENERATORS", "SHARDS", "STRICT_ROUTING", "READ_YOUR_WRITES_SECONDS", "kind", "layout"),
    *("epoch", "unsigned", "fields", "max_backward_ms", "sequence", "shard_field", "key_hash"),
    *("single_process", "max_ahead_ms", "next_id_language", "sequential", "pid", "mac"),
    *("total_shards", "redis", "prefix", "key_ttl_ms", "mode", "lease", "url", "name", "ttl"),
    *("margin", "database", "env", "databases", "ranges", "logical_shards", "route_by"),
    *("closed", "incoming", "replicas", "primary", "epoch_ms", "time_bits", "sequence_bits"),
    *("time_unit_ms", "low_fields", "time_digits", "random_digits", "server_digits"),
    *("snowflake", "sharded", "decimal", "locality", "uniqid", "twitter", "instagram"),
    *("sonyflake", "shard", "worker", "datacenter", "server", "machine", "modulo", "mixed"),
    *("plpgsql", "c", "php", "uid_fields", "redis://x", "database", "2024-01-01", "a", "b"),
]


def json_like(leaves: int = 12) -> st.SearchStrategy[object]:
    """None, bools, ints of any size, floats with NaN, strings (often a known name),
    and lists and dicts of those, nested."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.sampled_from([-1, 0, 1, 2**16, 2**16 + 1, 2**63, 2**64])
        # as powers, not values: Hypothesis writes its strategies out, and 10**5000 has
        # more digits than Python turns into a string
        | st.sampled_from([19, 400, 5000]).map(lambda digits: 10**digits)
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.sampled_from(WORDS)
        | st.text(max_size=12)
    )
    keys = st.sampled_from(WORDS) | st.text(max_size=8) | st.integers() | st.none()
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.tuples(inner, inner)
            | st.dictionaries(keys, inner, max_size=5)
        ),
        max_leaves=leaves,
    )


def entry_of(
    first: dict[str, st.SearchStrategy[object]], optional: dict[str, st.SearchStrategy[object]]
) -> st.SearchStrategy[dict[Any, object]]:
    """A dict with ``first``'s keys, some of ``optional``'s, and now and then another key;
    every value is either a plausible one or anything at all."""
    return st.fixed_dictionaries(
        {key: values | json_like() for key, values in first.items()},
        optional={key: values | json_like() for key, values in optional.items()},
    ).flatmap(
        lambda fixed: st.sampled_from([{}, {}, {}, {"stray": 1}]).map(
            lambda extra: {**extra, **fixed}
        )
    )


#: Plausible values of each option (mixed with anything at all by ``entry_of``), so that
#: the checks behind a sound layout, fields and leases are reached too.
_FIELD = st.sampled_from(["shard", "worker", "datacenter", "server", "machine", "node"])
_LAYOUT_DICT = st.fixed_dictionaries(
    {},
    optional={
        "fields": st.lists(st.tuples(_FIELD, st.integers(0, 70)), max_size=3),
        "low_fields": st.lists(st.tuples(_FIELD, st.integers(0, 20)), max_size=2),
        "time_bits": st.integers(0, 70),
        "sequence_bits": st.integers(0, 20),
        "time_unit_ms": st.sampled_from([0, 1, 10, 1000, 86_400_001]),
        "epoch_ms": st.integers(-1, 2**63),
        "time_digits": st.integers(0, 21),
        "random_digits": st.integers(0, 20),
        "server_digits": st.integers(0, 20),
    },
)
_LEASE = st.fixed_dictionaries(
    {"lease": st.sampled_from(["redis", "database"])},
    optional={
        "url": st.just("redis://127.0.0.1:6379/0"),
        "name": st.sampled_from(["orders", "", "a b"]),
        "ttl": st.sampled_from([0, 10, 1e308, 10**400]),
        "margin": st.sampled_from([1, 9, 10**400]),
        "database": st.just("default"),
    },
)
_NODE = st.integers(-1, 2**16) | st.fixed_dictionaries({"env": st.just("WORKER_ID")}) | _LEASE
_GENERATOR_OPTIONS: dict[str, st.SearchStrategy[object]] = {
    "layout": st.sampled_from(["twitter", "instagram", "sonyflake", "decimal", "x"]) | _LAYOUT_DICT,
    "epoch": st.sampled_from(["2024-01-01T00:00:00Z", "2999-01-01", "1960-01-01"])
    | st.integers(-1, 2**64),
    "unsigned": st.booleans(),
    "fields": st.dictionaries(_FIELD, _NODE, max_size=3),
    "max_backward_ms": st.integers(0, 10) | st.floats(),
    "sequence": st.fixed_dictionaries(
        {"redis": st.just("redis://127.0.0.1:6379/0")},
        optional={"mode": st.sampled_from(["php", "uid_fields"]), "key_ttl_ms": st.integers()},
    ),
    "shard_field": _FIELD,
    "key_hash": st.sampled_from(["modulo", "mixed"]),
    "single_process": st.booleans(),
    "max_ahead_ms": st.integers(0, 10**13),
    "next_id_language": st.sampled_from(["plpgsql", "c"]),
    "sequential": st.booleans(),
    "pid": st.integers(-1, 70000),
    "mac": st.sampled_from(["02:42:ac:11:00:02", "nope"]) | st.integers(-1, 2**28),
    "total_shards": st.integers(0, 11),
}

#: A ``GENERATORS`` entry: a kind (usually a real one) and options, mostly of that kind.
GENERATOR_ENTRY = st.one_of(
    entry_of(
        {"kind": st.just(kind)},
        {key: _GENERATOR_OPTIONS[key] for key in sorted(keys) if key in _GENERATOR_OPTIONS},
    )
    for kind, keys in GENERATOR_KEYS.items()
) | entry_of({"kind": st.sampled_from(["snowflake", "ulid"])}, _GENERATOR_OPTIONS)

_ALIAS = st.sampled_from(["shard_0", "shard_1", "shard_2"])
_SPAN = st.tuples(st.integers(-1, 2**16 + 1), st.integers(0, 2**17)).map(list)

#: A ``SHARDS`` entry: databases (usually a list of aliases) and options of any kind.
SHARD_MAP_ENTRY = entry_of(
    {"databases": st.lists(_ALIAS, min_size=1, max_size=3)},
    {
        "ranges": st.dictionaries(_ALIAS, _SPAN, max_size=3),
        "logical_shards": st.sampled_from([1, 2, 1024, 8192, 2**16, 2**16 + 1, 10**8]),
        "route_by": _FIELD,
        "closed": st.lists(_ALIAS, max_size=2),
        "incoming": st.lists(_ALIAS, max_size=2),
        "replicas": st.dictionaries(_ALIAS, st.lists(st.sampled_from(["r1", "r2"]))),
    },
)
