"""The validator never raises: every malformed settings value, whatever its type or
size, is a problem at its key path (``validate``), a ``ConfigurationError``
(``UidConfig``), and the bounds it checks are stated (logical shards, epochs).
"""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.settings_values import GENERATOR_ENTRY, HUGE, SHARD_MAP_ENTRY, WORDS, json_like
from uid_fields import TWITTER, ConfigurationError, SnowflakeGenerator
from uid_fields.config import Problem, UidConfig, build_shard_map, validate

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
SHARDED = SETTINGS["GENERATORS"]["photos"]


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


def test_the_settings_here_are_sound() -> None:
    assert validate(SETTINGS) == []


# -- a malformed value is a problem at its key path, never an exception -----------------------


def placed(path: str, value: object, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    """SETTINGS with ``value`` at ``path``; with ``parent``, the dict holding it is
    replaced by ``parent`` plus the value (a lease or a sequence that was not there)."""
    if parent is None:
        return changed(path, value)
    head, _, last = path.rpartition(".")
    return changed(head, {**parent, last: value})


def reported_once(settings: dict[str, Any], path: str, codes: tuple[str, ...]) -> Problem:
    """The one problem of ``settings``, at ``path`` with one of ``codes``; UidConfig
    refuses the dict naming the same path."""
    problem = only(validate(settings))
    assert problem.path == path and problem.code in codes, problem
    with pytest.raises(ConfigurationError) as caught:
        UidConfig(settings)
    assert str(caught.value).startswith(f"{path}: "), str(caught.value)
    return problem


LEASE = {"lease": "redis", "url": "redis://127.0.0.1:6379/0", "name": "orders"}
SEQUENCE = {"redis": "redis://127.0.0.1:6379/0"}

#: Every option whose value is compared with a set of names: (path, the dict holding it).
NAMED_OPTIONS: list[tuple[str, dict[str, Any] | None]] = [
    ("GENERATORS.photos.shard_field", None),
    ("GENERATORS.photos.key_hash", None),
    ("GENERATORS.photos.next_id_language", None),
    ("GENERATORS.orders.kind", None),
    ("GENERATORS.legacy.kind", None),
    ("GENERATORS.orders.fields.worker.lease", {}),
    ("GENERATORS.orders.fields.worker.name", LEASE),
    ("GENERATORS.orders.fields.worker.url", LEASE),
    ("GENERATORS.orders.fields.worker.env", {}),
    ("GENERATORS.photos.sequence.mode", SEQUENCE),
    ("GENERATORS.photos.sequence.prefix", SEQUENCE),
    ("SHARDS.main.route_by", None),
]


@pytest.mark.parametrize("value", [{}, [5, 3], [], {"a": [1]}], ids=repr)
@pytest.mark.parametrize(("path", "parent"), NAMED_OPTIONS, ids=[p for p, _ in NAMED_OPTIONS])
def test_an_unhashable_name_is_a_type_problem(
    path: str, parent: dict[str, Any] | None, value: object
) -> None:
    reported_once(placed(path, value, parent), path, ("E014",))


def test_an_unhashable_shard_field_in_a_custom_layout_is_a_type_problem() -> None:
    layout = {"fields": [["shard", 10], ["worker", 3]], "sequence_bits": 10}
    settings = changed("GENERATORS.photos.layout", layout)
    settings["GENERATORS"]["photos"]["fields"] = {"worker": 1}
    settings["GENERATORS"]["photos"]["shard_field"] = ["shard"]
    reported_once(settings, "GENERATORS.photos.shard_field", ("E014",))


#: Epochs no layout can take: out of range (before 1970, past the year 9999, more than
#: 64 bits), of the wrong type, or absurd strings.
BAD_EPOCHS: list[object] = [
    2**63,
    2**64,
    10**400,
    HUGE,
    -HUGE,
    -1,
    "1960-01-01",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "9" * 5000,
    "1" * 30,
    "²",
    "",
    " ",
    True,
    False,
    None,
    math.nan,
    math.inf,
    1.7e12,
    [],
    {},
]


def short(value: object) -> str:
    return f"int of {value.bit_length()} bits" if isinstance(value, int) else repr(value)[:30]


@pytest.mark.parametrize("name", ["orders", "photos", "legacy"])
@pytest.mark.parametrize("epoch", BAD_EPOCHS, ids=short)
def test_an_epoch_out_of_range_is_a_problem_at_its_key(name: str, epoch: object) -> None:
    path = f"GENERATORS.{name}.epoch"
    problem = reported_once(changed(path, epoch), path, ("E005", "E014"))
    assert "epoch" in problem.message and len(problem.message) < 300, problem.message


@pytest.mark.parametrize("epoch_ms", [2**63, HUGE, -1, math.nan], ids=short)
@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("orders", {"fields": [["worker", 10]]}),
        ("photos", {"fields": [["shard", 13]], "sequence_bits": 10}),
        ("legacy", {}),
    ],
)
def test_a_layout_epoch_ms_out_of_range_is_a_problem(
    name: str, layout: dict[str, Any], epoch_ms: object
) -> None:
    settings = changed(f"GENERATORS.{name}.layout", {**layout, "epoch_ms": epoch_ms})
    del settings["GENERATORS"][name]["epoch"]
    if name == "orders":
        settings["GENERATORS"][name]["fields"] = {"worker": 1}
    path = f"GENERATORS.{name}.layout"
    problem = reported_once(settings, path, ("E005", "E014"))
    assert "epoch_ms" in problem.message and len(problem.message) < 300, problem.message


#: Numeric options given a value no int or float check can print or convert:
#: (path, the dict holding it, the value, what the message must name).
NUMBERS: list[tuple[str, dict[str, Any] | None, object, str]] = [
    ("GENERATORS.orders.max_backward_ms", None, 10**400, "max_backward_ms"),
    ("GENERATORS.orders.max_backward_ms", None, HUGE, "max_backward_ms"),
    ("GENERATORS.photos.max_ahead_ms", None, HUGE, "max_ahead_ms"),
    ("GENERATORS.orders.fields.worker", None, HUGE, "worker"),
    ("GENERATORS.orders.fields.worker", None, -HUGE, "worker"),
    ("GENERATORS.legacy.fields.server", None, HUGE, "server"),
    ("GENERATORS.events.pid", None, HUGE, "pid"),
    ("GENERATORS.events.mac", None, HUGE, "mac"),
    ("GENERATORS.php.total_shards", None, HUGE, "total_shards"),
    ("GENERATORS.photos.sequence.key_ttl_ms", SEQUENCE, HUGE, "key_ttl_ms"),
    ("GENERATORS.orders.fields.worker.ttl", LEASE, 10**400, "ttl"),
    ("GENERATORS.orders.fields.worker.ttl", LEASE, HUGE, "ttl"),
    ("GENERATORS.orders.fields.worker.margin", LEASE, 10**400, "margin"),
    ("READ_YOUR_WRITES_SECONDS", None, 10**400, "READ_YOUR_WRITES_SECONDS"),
    ("FAN_OUT_CONCURRENCY", None, HUGE, "FAN_OUT_CONCURRENCY"),
    ("FAN_OUT_OFFSET_WARNING", None, -HUGE, "FAN_OUT_OFFSET_WARNING"),
    ("SHARDS.main.logical_shards", None, HUGE, "logical_shards"),
]


@pytest.mark.parametrize(
    ("path", "parent", "value", "named"),
    NUMBERS,
    ids=[f"{p}={short(v)}" for p, _, v, _ in NUMBERS],
)
def test_a_number_too_large_to_print_is_a_problem_naming_its_key(
    path: str, parent: dict[str, Any] | None, value: object, named: str
) -> None:
    problem = reported_once(placed(path, value, parent), path, ("E004", "E005", "E014"))
    assert named in problem.message and len(problem.message) < 300, problem.message


@pytest.mark.parametrize("key", ["time_bits", "sequence_bits", "time_unit_ms"])
def test_a_layout_parameter_too_large_to_print_is_a_problem(key: str) -> None:
    layout = {"fields": [["worker", 10]], key: HUGE}
    problem = reported_once(
        changed("GENERATORS.orders.layout", layout), "GENERATORS.orders.layout", ("E005",)
    )
    assert key in problem.message and len(problem.message) < 300, problem.message


def test_a_key_too_large_to_print_is_a_problem() -> None:
    settings = copy.deepcopy(SETTINGS)
    settings["GENERATORS"]["orders"][HUGE] = 1
    problem = only(validate(settings))
    assert problem.code == "E013" and len(problem.path) < 100 and len(problem.message) < 300
    settings = changed("GENERATORS.orders.fields", {HUGE: 1, "worker": 1})
    problem = only(validate(settings))
    assert problem.path == "GENERATORS.orders.fields" and len(problem.message) < 300


# -- logical shards are bounded --------------------------------------------------------------


@pytest.mark.parametrize("total", [2**16 + 1, 10**8, 3_978_134_014])
def test_logical_shards_above_the_bound_are_e004(total: int) -> None:
    path = "SHARDS.main.logical_shards"
    problem = reported_once(changed(path, total), path, ("E004",))
    assert "65536" in problem.message
    with pytest.raises(ConfigurationError, match="65536"):
        build_shard_map({"databases": ["a"], "logical_shards": total}, SnowflakeGenerator(TWITTER))


def test_logical_shards_up_to_the_bound_are_fine() -> None:
    settings = changed("SHARDS.main.logical_shards", 2**16)
    assert validate(settings) == []
    assert UidConfig(settings).shard_map("main", "orders").logical_shards == 2**16


@pytest.mark.parametrize("stop", [2**16 + 1, 10**8, HUGE], ids=short)
def test_a_range_past_the_bound_is_e004(stop: int) -> None:
    settings = changed("SHARDS.main", {"ranges": {"shard_0": [0, 1024], "shard_1": [1024, stop]}})
    problem = reported_once(settings, "SHARDS.main.ranges.shard_1", ("E004",))
    assert "65536" in problem.message and len(problem.message) < 300


def test_a_route_wider_than_the_bound_does_not_fit_a_map() -> None:
    wide = {**SHARDED, "layout": {"fields": [["shard", 20]], "sequence_bits": 2}}
    settings = {
        "GENERATORS": {"wide": {**wide, "single_process": True}},
        "SHARDS": SETTINGS["SHARDS"],
    }
    config = UidConfig(settings)  # a generator on its own may have 2**20 shards
    with pytest.raises(ConfigurationError, match=r"^SHARDS\.main: .*65536"):
        config.shard_map("main", "wide")


# -- any value at all: a list of problems, never an exception ---------------------------------


def assert_never_raises(settings: object) -> None:
    problems = validate(settings)
    assert isinstance(problems, list) and all(isinstance(p, Problem) for p in problems)
    assert all(isinstance(p.path, str) and isinstance(p.message, str) for p in problems)
    try:
        config = UidConfig(settings)
    except ConfigurationError:
        assert problems
        return
    assert not problems
    for shards in config.settings.get("SHARDS", {}):
        for generator in config.settings.get("GENERATORS", {}):
            with contextlib.suppress(ConfigurationError):
                config.shard_map(shards, generator)


@given(json_like(20))
def test_any_settings_value_is_problems_never_an_exception(settings: object) -> None:
    assert_never_raises(settings)


@given(st.dictionaries(st.sampled_from(WORDS[:4]) | st.text(max_size=6), json_like(20)))
def test_any_top_level_dict_is_problems_never_an_exception(settings: dict[Any, object]) -> None:
    assert_never_raises(settings)


@given(GENERATOR_ENTRY)
def test_any_generator_entry_is_problems_never_an_exception(entry: dict[Any, object]) -> None:
    assert_never_raises({**SETTINGS, "GENERATORS": {**SETTINGS["GENERATORS"], "g": entry}})


@given(SHARD_MAP_ENTRY)
def test_any_shard_map_entry_is_problems_never_an_exception(entry: dict[Any, object]) -> None:
    assert_never_raises({**SETTINGS, "SHARDS": {"main": entry}})


def test_names_and_aliases_that_are_no_strings_are_type_problems() -> None:
    settings = copy.deepcopy(SETTINGS)
    settings["SHARDS"][7] = {"databases": ["shard_0"]}
    settings["SHARDS"]["main"] = {"ranges": {5: [0, 512], "shard_1": [512, 1024]}}
    found = [(p.path, p.code) for p in validate(settings)]
    assert found == [("SHARDS.main.ranges.5", "E014"), ("SHARDS.7", "E014")]
    with pytest.raises(ConfigurationError, match=r"SHARDS\.7: shard map names must be strings"):
        UidConfig(settings)
