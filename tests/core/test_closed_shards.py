"""Closed databases: no new keys there; what is there stays readable and writable."""

from __future__ import annotations

import pytest

from uid_fields import INSTAGRAM, TWITTER, ShardedIdGenerator, ShardMap, SnowflakeGenerator
from uid_fields.config import shard_map_problems, validate
from uid_fields.errors import ConfigurationError
from uid_fields.placement import ByField, ByModulo, Placement

DATABASES = ["shard_0", "shard_1", "shard_2", "shard_3"]


def sharded(closed: tuple[str, ...] = ()) -> Placement:
    shard_map = ShardMap(DATABASES, route=ByField(INSTAGRAM, "shard"), closed=closed)
    return Placement(ShardedIdGenerator(INSTAGRAM), shard_map)


def test_keyless_rows_go_to_open_databases_only() -> None:
    placement = sharded(("shard_0", "shard_2"))
    where = {placement.database_of(placement.new_id()) for _ in range(400)}
    assert where == {"shard_1", "shard_3"}
    batch = {placement.database_of(i) for i in placement.new_ids(400)}
    assert batch == {"shard_1", "shard_3"}


def test_a_key_whose_database_closed_gets_new_rows_elsewhere_and_reads_both() -> None:
    before, after = sharded(), sharded(("shard_0",))
    keys = [k for k in range(2000) if before.database_for_key(k) == "shard_0"][:50]
    assert keys
    for key in keys:
        old_id = before.new_id(key)  # made while shard_0 was open
        new_id = after.new_id(key)
        assert after.database_of(new_id) != "shard_0"
        assert after.database_of(new_id) == after.database_for_key(key)  # stable per key
        assert after.databases_for_key(key) == ("shard_0", after.database_of(new_id))
        assert after.fits_key(old_id, key) and after.fits_key(new_id, key)
    other = next(k for k in range(2000) if before.database_for_key(k) == "shard_1")
    assert after.databases_for_key(other) == ("shard_1",)  # open: unchanged, one database
    assert after.logical_shard_for_key(other) == before.logical_shard_for_key(other)


def test_hashed_ids_skip_closed_databases() -> None:
    shard_map = ShardMap(DATABASES, route=ByModulo(1024), closed=("shard_3",))
    placement = Placement(SnowflakeGenerator(TWITTER, worker=1), shard_map)
    ids = [placement.new_id() for _ in range(500)] + placement.new_ids(500)
    assert len(set(ids)) == 1000
    assert {placement.database_of(i) for i in ids} == {"shard_0", "shard_1", "shard_2"}


def test_a_generator_whose_ids_all_land_on_a_closed_database_is_an_error() -> None:
    ranges = {"eu": (0, 1), "us": (1, 32)}
    route = ByField(TWITTER, "datacenter")
    shard_map = ShardMap(route=route, ranges=ranges, closed=("eu",))
    placement = Placement(SnowflakeGenerator(TWITTER, datacenter=0, worker=1), shard_map)
    with pytest.raises(ConfigurationError, match="land on closed databases"):
        placement.new_id()


def test_shard_map_refuses_bad_closed_lists() -> None:
    route = ByField(INSTAGRAM, "shard")
    with pytest.raises(ValueError, match="not in the map"):
        ShardMap(DATABASES, route=route, closed=["shard_9"])
    with pytest.raises(ValueError, match="every database is closed"):
        ShardMap(DATABASES, route=route, closed=DATABASES)
    with pytest.raises(TypeError, match="list of aliases"):
        ShardMap(DATABASES, route=route, closed="shard_0")
    assert "closed=['shard_1']" in repr(ShardMap(DATABASES, route=route, closed=["shard_1"]))


@pytest.mark.parametrize(
    ("closed", "message"),
    [
        ("shard_0", "must be a list of database aliases"),
        (["shard_9"], "names databases not in this map"),
        (DATABASES, "closes every database"),
    ],
)
def test_settings_closed_is_checked(closed: object, message: str) -> None:
    problems = shard_map_problems("main", {"databases": DATABASES, "closed": closed})
    assert [p.path for p in problems] == ["SHARDS.main.closed"]
    assert message in problems[0].message


def test_settings_closed_builds_the_map() -> None:
    settings = {
        "GENERATORS": {"photos": {"kind": "sharded", "single_process": True}},
        "SHARDS": {"main": {"databases": DATABASES, "closed": ["shard_2"]}},
    }
    assert validate(settings) == []
