"""Settings dicts in the core: every mistake is named by its key path, nothing is built early."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from uid_fields import (
    ConfigurationError,
    DatabaseLease,
    LocalityUUIDGenerator,
    ShardedIdGenerator,
    SnowflakeGenerator,
)
from uid_fields.config import (
    Problem,
    UidConfig,
    build_generator,
    route_of,
    shard_map_of,
    validate,
)
from uid_fields.placement import route_for

SETTINGS: dict[str, Any] = {
    "GENERATORS": {
        "orders": {
            "kind": "snowflake",
            "layout": "twitter",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {"datacenter": 0, "worker": 1},
            "max_backward_ms": 5,
        },
        "photos": {
            "kind": "sharded",
            "layout": "instagram",
            "epoch": "2024-01-01T00:00:00Z",
            "single_process": True,
        },
        "events": {"kind": "locality", "sequential": True},
        "legacy": {"kind": "decimal", "epoch": "2024-01-01T00:00:00Z", "fields": {"server": 3}},
        "php": {"kind": "uniqid", "total_shards": 4},
    },
    "SHARDS": {"main": {"databases": ["shard_0", "shard_1"]}},
    "STRICT_ROUTING": True,
}


def changed(path: str, value: Any) -> dict[str, Any]:
    """SETTINGS with the key at a dotted path set (created if missing)."""
    settings = copy.deepcopy(SETTINGS)
    *parents, last = path.split(".")
    node = settings
    for key in parents:
        node = node[key]
    node[last] = value
    return settings


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, problems
    return problems[0]


def test_a_sound_dict_has_no_problems() -> None:
    assert validate(SETTINGS) == []


# -- unknown keys ----------------------------------------------------------------------------


def test_a_misspelt_generator_option_is_named() -> None:
    settings = changed("GENERATORS.orders.max_backwards_ms", 5)
    problem = only(validate(settings))
    assert (problem.path, problem.code) == ("GENERATORS.orders.max_backwards_ms", "E013")
    assert "did you mean 'max_backward_ms'" in problem.message


def test_a_misspelt_top_level_key_is_named() -> None:
    problem = only(validate(changed("STRICT_ROUTNG", False)))
    assert (problem.path, problem.code) == ("STRICT_ROUTNG", "E013")
    assert "did you mean 'STRICT_ROUTING'" in problem.message


def test_a_misspelt_shard_map_key_is_named() -> None:
    settings = copy.deepcopy(SETTINGS)
    settings["SHARDS"]["main"] = {"databses": ["shard_0", "shard_1"]}
    paths = {(p.path, p.code) for p in validate(settings)}
    assert ("SHARDS.main.databses", "E013") in paths
    assert ("SHARDS.main", "E004") in paths  # and so it names no databases at all


def test_a_misspelt_lease_key_is_named() -> None:
    worker = {"lease": "redis", "url": "redis://127.0.0.1:6379/0", "name": "o", "tll": 10}
    problem = only(validate(changed("GENERATORS.orders.fields.worker", worker)))
    assert (problem.path, problem.code) == ("GENERATORS.orders.fields.worker.tll", "E013")


def test_an_option_of_another_kind_is_unknown() -> None:
    problem = only(validate(changed("GENERATORS.events.max_backward_ms", 10)))
    assert (problem.path, problem.code) == ("GENERATORS.events.max_backward_ms", "E013")


# -- wrong types -----------------------------------------------------------------------------


def test_a_string_where_a_bool_is_due() -> None:
    problem = only(validate(changed("STRICT_ROUTING", "no")))
    assert (problem.path, problem.code) == ("STRICT_ROUTING", "E014")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "10"])
def test_max_backward_ms_must_be_a_finite_number(bad: object) -> None:
    problem = only(validate(changed("GENERATORS.orders.max_backward_ms", bad)))
    assert (problem.path, problem.code) == ("GENERATORS.orders.max_backward_ms", "E014")


@pytest.mark.parametrize("bad", ["5", -1, math.nan, math.inf, True])
def test_read_your_writes_seconds_must_be_a_finite_number(bad: object) -> None:
    # NaN would pin a primary forever (no deadline ever passes), silently
    problem = only(validate(changed("READ_YOUR_WRITES_SECONDS", bad)))
    assert (problem.path, problem.code) == ("READ_YOUR_WRITES_SECONDS", "E014")


@pytest.mark.parametrize(
    ("key", "value", "path"),
    [
        ("incoming", "shard_2", "SHARDS.main.incoming"),
        ("incoming", ["shard_2", 3], "SHARDS.main.incoming.1"),
        ("closed", "shard_0", "SHARDS.main.closed"),
    ],
)
def test_incoming_and_closed_are_lists_of_aliases(key: str, value: object, path: str) -> None:
    assert validate(changed(f"SHARDS.main.{key}", ["shard_2"] if key == "incoming" else [])) == []
    problem = only(validate(changed(f"SHARDS.main.{key}", value)))
    assert (problem.path, problem.code) == (path, "E014")


def test_a_bool_is_not_a_worker_id() -> None:
    problem = only(validate(changed("GENERATORS.orders.fields.worker", True)))
    assert (problem.path, problem.code) == ("GENERATORS.orders.fields.worker", "E014")


def test_logical_shards_must_be_an_int() -> None:
    problem = only(validate(changed("SHARDS.main.logical_shards", "1024")))
    assert (problem.path, problem.code) == ("SHARDS.main.logical_shards", "E014")


# -- wrong shapes ----------------------------------------------------------------------------


def test_settings_that_are_not_a_dict() -> None:
    problem = only(validate([("GENERATORS", {})]))
    assert (problem.path, problem.code) == ("", "E014")
    assert "must be a dict" in problem.message


def test_a_list_where_the_generators_dict_is_due() -> None:
    problem = only(validate(changed("GENERATORS", [SETTINGS["GENERATORS"]["orders"]])))
    assert (problem.path, problem.code) == ("GENERATORS", "E014")


def test_a_list_where_a_generator_dict_is_due() -> None:
    problem = only(validate(changed("GENERATORS.orders", ["snowflake", "twitter"])))
    assert (problem.path, problem.code) == ("GENERATORS.orders", "E014")


def test_a_list_where_the_fields_dict_is_due() -> None:
    problem = only(validate(changed("GENERATORS.orders.fields", [["worker", 1]])))
    assert (problem.path, problem.code) == ("GENERATORS.orders.fields", "E014")


def test_a_string_where_the_databases_list_is_due() -> None:
    problem = only(validate(changed("SHARDS.main.databases", "shard_0")))
    assert (problem.path, problem.code) == ("SHARDS.main.databases", "E014")


def test_a_range_that_is_not_a_pair() -> None:
    settings = changed("SHARDS.main", {"ranges": {"shard_0": [0, 512, 1024]}})
    problem = only(validate(settings))
    assert (problem.path, problem.code) == ("SHARDS.main.ranges.shard_0", "E014")


# -- wrong values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "text"),
    [
        ("GENERATORS.orders.kind", "ulid", "ulid"),
        ("GENERATORS.orders.layout", "twiter", "unknown layout 'twiter'"),
        ("GENERATORS.orders.epoch", "2999-01-01", "in the future"),
        ("GENERATORS.orders.epoch", "yesterday", "ISO 8601"),
        ("GENERATORS.orders.fields.worker", 99, "worker=99 is out of range 0..31"),
        ("GENERATORS.photos.key_hash", "sha", "'modulo' or 'mixed'"),
        ("GENERATORS.photos.next_id_language", "rust", "one of ['plpgsql', 'c']"),
        ("GENERATORS.events.pid", 70000, "pid=70000 is out of range"),
        ("GENERATORS.php.total_shards", 11, "total_shards=11 is out of range 1..10"),
    ],
)
def test_wrong_values_are_e005(path: str, value: Any, text: str) -> None:
    problem = only(validate(changed(path, value)))
    assert (problem.path, problem.code) == (path, "E005")
    assert text in problem.message


def test_an_unknown_lease_is_e005() -> None:
    problem = only(validate(changed("GENERATORS.orders.fields.worker", {"lease": "zk"})))
    assert (problem.path, problem.code) == ("GENERATORS.orders.fields.worker.lease", "E005")
    assert "must be 'redis' or 'database', got 'zk'" in problem.message


def test_a_layout_over_64_bits_is_e005() -> None:
    layout = {"time_bits": 60, "fields": [["worker", 10]]}
    problem = only(validate(changed("GENERATORS.orders.layout", layout)))
    assert (problem.path, problem.code) == ("GENERATORS.orders.layout", "E005")


def test_a_lease_ttl_and_margin_are_checked_without_a_lease() -> None:
    worker = {"lease": "redis", "url": "redis://x", "name": "o", "ttl": 10, "margin": 9}
    problem = only(validate(changed("GENERATORS.orders.fields.worker", worker)))
    assert (problem.path, problem.code) == ("GENERATORS.orders.fields.worker.margin", "E005")


def test_duplicate_databases_are_e004() -> None:
    problem = only(validate(changed("SHARDS.main.databases", ["a", "a"])))
    assert (problem.path, problem.code) == ("SHARDS.main.databases", "E004")


# -- UidConfig -------------------------------------------------------------------------------


def test_uid_config_names_the_key_path_of_every_mistake() -> None:
    settings = changed("GENERATORS.orders.max_backwards_ms", 5)
    settings["STRICT_ROUTING"] = "no"
    with pytest.raises(ConfigurationError) as caught:
        UidConfig(settings)
    message = str(caught.value)
    assert "GENERATORS.orders.max_backwards_ms: unknown key" in message
    assert "STRICT_ROUTING: must be True or False" in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("bad", [None, "UID_FIELDS", [("GENERATORS", {})]])
def test_uid_config_of_something_not_a_dict(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="must be a dict"):
        UidConfig(bad)


def test_uid_config_builds_each_generator_once_on_first_use() -> None:
    config = UidConfig(SETTINGS)
    orders = config.generator("orders")
    assert isinstance(orders, SnowflakeGenerator) and orders.node == {"datacenter": 0, "worker": 1}
    assert orders.max_backward_ms == 5
    assert config.generator("orders") is orders
    assert isinstance(config.generator("photos"), ShardedIdGenerator)
    assert isinstance(config.generator("events"), LocalityUUIDGenerator)
    shard_map = config.shard_map("main", "orders")
    assert config.shard_map("main", "orders") is shard_map
    assert shard_map.databases == ("shard_0", "shard_1")
    assert shard_map.database_for(orders.next_id()) in shard_map.databases


def test_uid_config_unknown_names_name_their_section() -> None:
    config = UidConfig(SETTINGS)
    with pytest.raises(ConfigurationError, match=r"^GENERATORS\.nope: no such entry"):
        config.generator("nope")
    with pytest.raises(ConfigurationError, match=r"^SHARDS\.nope: no such entry"):
        config.shard_map("nope", "orders")


def test_a_shard_map_that_does_not_fit_the_generator_names_the_map() -> None:
    config = UidConfig(changed("SHARDS.main.route_by", "region"))
    with pytest.raises(ConfigurationError, match=r"^SHARDS\.main: .*region"):
        config.shard_map("main", "orders")


def test_a_database_lease_needs_a_factory_up_front() -> None:
    worker = {"lease": "database", "database": "default", "name": "orders"}
    settings = changed("GENERATORS.orders.fields.worker", worker)
    assert validate(settings) == []  # fine where an adapter gives the factory
    with pytest.raises(ConfigurationError, match=r"GENERATORS\.orders\.fields\.worker: "):
        UidConfig(settings)


def test_a_database_lease_from_an_injected_factory(tmp_path: Path) -> None:
    worker = {"lease": "database", "database": "leases", "name": "orders", "ttl": 5}
    made: list[DatabaseLease] = []

    def factory(name: str, ttl: float, *, database: str, margin: float | None) -> DatabaseLease:
        lease = DatabaseLease(f"sqlite:///{tmp_path / database}.db", name, ttl, margin=margin)
        lease.create_table()
        made.append(lease)
        return lease

    config = UidConfig(changed("GENERATORS.orders.fields.worker", worker), database_lease=factory)
    assert made == []  # nothing is claimed before the first use
    assert config.generator("orders").node == {"datacenter": 0, "worker": 0}
    assert [lease.value for lease in made] == [0]
    made[0].release()


def test_build_generator_validates_its_entry() -> None:
    with pytest.raises(ConfigurationError, match=r"^GENERATORS\.x\.fields: .*takes no node"):
        build_generator("x", {"kind": "locality", "fields": {"worker": 3}})


# -- routes from the dicts alone -------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SETTINGS["GENERATORS"]))
@pytest.mark.parametrize(
    "shards",
    [{"databases": ["a", "b"]}, {"databases": ["a", "b"], "logical_shards": 64}],
)
def test_the_route_from_the_dicts_is_the_route_of_the_generator(
    name: str, shards: dict[str, Any]
) -> None:
    entry = SETTINGS["GENERATORS"][name]
    generator = build_generator(name, entry)
    by_generator = route_for(generator, logical_shards=shards.get("logical_shards", 1024))
    by_dicts = route_of(entry, shards)
    assert repr(by_dicts) == repr(by_generator)
    if isinstance(generator, ShardedIdGenerator):
        value: object = generator.next_id(shard=77)
    else:
        value = generator.next_id()
    assert by_dicts.logical_shard(value) == by_generator.logical_shard(value)
    assert shard_map_of(shards, entry).databases == ("a", "b")


def test_route_by_a_node_field_from_the_dicts() -> None:
    entry = SETTINGS["GENERATORS"]["orders"]
    route = route_of(entry, {"databases": ["eu", "us"], "route_by": "datacenter"})
    assert route.logical_shards == 32
    with pytest.raises(ValueError, match="region"):
        shard_map_of({"databases": ["a"], "route_by": "region"}, entry)


SHARDED = {"kind": "sharded", "layout": "instagram", "epoch": "2024-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("extra", "safe"),
    [
        ({}, False),
        ({"single_process": True}, True),
        ({"single_process": False}, False),
        ({"sequence": {"redis": "redis://127.0.0.1:6379/0"}}, True),
    ],
)
def test_sharded_generators_must_be_safe_across_processes(
    extra: dict[str, Any], safe: bool
) -> None:
    from uid_fields.config import process_problems

    entry = {**SHARDED, **extra}
    assert validate({"GENERATORS": {"orders": entry}}) == []
    problems = process_problems("orders", entry)
    assert (problems == []) is safe
    if not safe:
        assert [(p.path, p.code) for p in problems] == [("GENERATORS.orders", "E016")]
        with pytest.raises(ConfigurationError, match="single_process"):
            UidConfig({"GENERATORS": {"orders": entry}}).generator("orders")


def test_a_node_field_per_process_makes_a_sharded_layout_safe() -> None:
    from uid_fields.config import process_problems

    layout = {"fields": [["shard", 10], ["worker", 3]], "sequence_bits": 10}
    entry = {**SHARDED, "layout": layout, "fields": {"worker": {"env": "WORKER_ID"}}}
    assert validate({"GENERATORS": {"orders": entry}}) == []
    assert process_problems("orders", entry) == []


@pytest.mark.parametrize(
    ("sequence", "path"),
    [
        ({"redis": 5}, "GENERATORS.orders.sequence.redis"),
        ({"url": "redis://x"}, "GENERATORS.orders.sequence.url"),
        ({"redis": "redis://x", "key_ttl_ms": 0}, "GENERATORS.orders.sequence.key_ttl_ms"),
        ({"redis": "redis://x", "mode": "perl"}, "GENERATORS.orders.sequence.mode"),
        ([1], "GENERATORS.orders.sequence"),
    ],
)
def test_a_bad_sequence_names_its_key(sequence: object, path: str) -> None:
    problems = validate({"GENERATORS": {"orders": {**SHARDED, "sequence": sequence}}})
    assert path in [p.path for p in problems]


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("FAN_OUT_CONCURRENCY", -1),
        ("FAN_OUT_CONCURRENCY", 257),
        ("FAN_OUT_CONCURRENCY", 1.5),
        ("FAN_OUT_CONCURRENCY", True),
        ("FAN_OUT_CONCURRENCY", "4"),
        ("FAN_OUT_OFFSET_WARNING", -1),
        ("FAN_OUT_OFFSET_WARNING", "1000"),
        ("FAN_OUT_OFFSET_WARNING", 1e3),
    ],
)
def test_fan_out_bounds_must_be_ints_in_range(key: str, bad: object) -> None:
    problem = only(validate(changed(key, bad)))
    assert (problem.path, problem.code) == (key, "E014")


@pytest.mark.parametrize(
    ("key", "good"),
    [("FAN_OUT_CONCURRENCY", 0), ("FAN_OUT_CONCURRENCY", 8), ("FAN_OUT_OFFSET_WARNING", None)],
)
def test_fan_out_bounds_that_are_sound(key: str, good: object) -> None:
    assert validate(changed(key, good)) == []
