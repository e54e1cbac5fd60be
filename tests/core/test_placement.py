"""The placement authority: routes of generators, shard keys, co-location, keyless, batches."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uid_fields import (
    INSTAGRAM,
    TWITTER,
    LocalityUUIDGenerator,
    ManualClock,
    ShardedIdGenerator,
    ShardKeyError,
    ShardMap,
    SnowflakeGenerator,
    UniqIdGenerator,
    WrongShardError,
)
from uid_fields.errors import ConfigurationError
from uid_fields.ids.layouts import DECIMAL
from uid_fields.placement import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    Placement,
    colocated_logical_shard,
    logical_shard_in,
    normalize_shard_key,
    route_fits,
    route_for,
)

DBS = ["shard_0", "shard_1", "shard_2", "shard_3"]
NOW_MS = 1_735_689_600_000


def _sharded(**kwargs: object) -> ShardedIdGenerator:
    return ShardedIdGenerator(INSTAGRAM, clock=ManualClock(NOW_MS), **kwargs)  # type: ignore[arg-type]


def test_route_for_each_generator() -> None:
    from uid_fields import DecimalGenerator

    assert isinstance(route_for(ShardedIdGenerator(INSTAGRAM)), ByField)
    assert isinstance(route_for(SnowflakeGenerator(TWITTER)), ByModulo)
    assert route_for(SnowflakeGenerator(TWITTER), by="datacenter").logical_shards == 32
    assert isinstance(route_for(DecimalGenerator(DECIMAL)), ByDecimalServer)
    assert isinstance(route_for(LocalityUUIDGenerator()), ByLocalityBlock)
    assert route_for(UniqIdGenerator(3)).logical_shards == 3
    with pytest.raises(ValueError, match="no field 'rack'"):
        route_for(SnowflakeGenerator(TWITTER), by="rack")


def test_logical_shard_in_stays_on_the_alias() -> None:
    shard_map = ShardMap(DBS, route=ByField(INSTAGRAM))
    picks = {logical_shard_in(shard_map, "shard_2", key) for key in range(1000)}
    assert {shard_map.database(p) for p in picks} == {"shard_2"}
    assert len(picks) > 500  # spread over the alias's range, stable per key
    assert logical_shard_in(shard_map, "shard_2", 42) == logical_shard_in(shard_map, "shard_2", 42)
    with pytest.raises(ValueError, match="not in this shard map"):
        logical_shard_in(shard_map, "elsewhere", 1)


def test_children_stay_with_parents_when_a_database_is_split() -> None:
    parents = ShardMap(DBS, route=ByModulo(1024))
    children = ShardMap(DBS, route=ByField(INSTAGRAM))
    gen = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS))
    parent_ids = gen.next_ids(2000)
    placed = {p: colocated_logical_shard(children, parents, p, key=p) for p in parent_ids}
    assert all(children.database(c) == parents.database_for(p) for p, c in placed.items())
    # Scale out: eight databases, each old range split in two. No id is rewritten.
    eight = [f"db{i}" for i in range(8)]
    parents8 = ShardMap(eight, route=ByModulo(1024))
    children8 = ShardMap(eight, route=ByField(INSTAGRAM))
    assert all(children8.database(c) == parents8.database_for(p) for p, c in placed.items())


def test_same_logical_space_shares_the_parents_logical_shard() -> None:
    shard_map = ShardMap(DBS, route=ByField(INSTAGRAM))
    parent = ShardedIdGenerator(INSTAGRAM, clock=ManualClock(NOW_MS)).next_id(shard=4321)
    assert colocated_logical_shard(shard_map, shard_map, parent, key=7) == 4321
    # Ranges that disagree with the parent's: still on the parent's database.
    odd = ShardMap(
        route=ByField(INSTAGRAM),
        ranges={
            "shard_0": (0, 100),
            "shard_1": (100, 200),
            "shard_2": (200, 4000),
            "shard_3": (4000, 8192),
        },
    )
    assert shard_map.database(4321) == "shard_2" and odd.database(4321) == "shard_3"
    assert odd.database(colocated_logical_shard(odd, shard_map, parent, key=7)) == "shard_2"


def test_small_integer_keys_spread_evenly_over_the_databases() -> None:
    generator = _sharded()
    placement = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    counts = Counter(placement.database_for_key(key) for key in range(1, 10_001))
    assert set(counts) == set(DBS)
    assert all(abs(n - 2500) <= 250 for n in counts.values()), counts
    # Instagram's own rule, when asked for: key % 8192, contiguous ranges.
    modulo = Placement(_sharded(key_hash="modulo"), placement.shard_map)
    assert modulo.logical_shard_for_key(8192 * 3 + 9) == 9


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (42, 42),
        ("42", 42),
        (" 42 ", 42),
        (uuid.UUID(int=7), 7),
        (str(uuid.UUID(int=7)), 7),
        (2**64 - 1, 2**64 - 1),
    ],
)
def test_shard_keys_normalise_to_one_integer(key: object, expected: int) -> None:
    assert normalize_shard_key(key) == expected


@pytest.mark.parametrize("key", [True, 1.5, "", "abc", "١٢", 2**64, None, b"12", [1]])
def test_values_that_are_no_shard_key_raise_shard_key_error(key: object) -> None:
    with pytest.raises(ShardKeyError):
        normalize_shard_key(key)
    assert issubclass(ShardKeyError, ValueError)


def test_digit_strings_and_uuids_place_like_their_integers() -> None:
    generator = _sharded()
    placement = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    assert placement.logical_shard_for_key("12345") == placement.logical_shard_for_key(12345)
    key = uuid.uuid4()
    assert placement.logical_shard_for_key(key) == placement.logical_shard_for_key(str(key))


def test_children_keyed_by_a_parent_live_on_the_parents_database() -> None:
    parents_gen = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS))
    parents = Placement(parents_gen, ShardMap(DBS, route=route_for(parents_gen)))
    child_gen = _sharded()
    children = Placement(
        child_gen, ShardMap(DBS, route=route_for(child_gen)), parent=parents, name="Order.id"
    )
    for parent_id in parents_gen.next_ids(500):
        child_id = children.new_id(parent_id)
        assert children.database_of(child_id) == parents.database_of(parent_id)
        assert children.fits_key(child_id, parent_id)


def test_keyless_ids_go_round_robin_over_the_databases() -> None:
    generator = _sharded()
    placement = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    counts = Counter(placement.database_of(placement.new_id()) for _ in range(400))
    assert counts == dict.fromkeys(DBS, 100)
    batch = placement.new_ids(400)
    assert Counter(placement.database_of(i) for i in batch) == dict.fromkeys(DBS, 100)


def test_batches_keep_each_key_on_its_logical_shard_in_input_order() -> None:
    generator = _sharded()
    placement = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    keys = [k % 7 for k in range(70)]
    ids = placement.new_ids(70, keys)
    assert len(set(ids)) == 70
    for key, value in zip(keys, ids, strict=True):
        assert generator.shard_of(value) == placement.logical_shard_for_key(key)
    with pytest.raises(ValueError, match="keys"):
        placement.new_ids(3, [1])
    plain = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS))
    assert len(set(Placement(plain, ShardMap(DBS, route=route_for(plain))).new_ids(50))) == 50


def test_a_map_that_cannot_read_the_ids_is_a_configuration_error() -> None:
    twitter = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS))
    instagram_map = ShardMap(DBS, route=ByField(INSTAGRAM))
    assert route_fits(instagram_map.route, twitter) is not None
    with pytest.raises(ConfigurationError, match="cannot route"):
        Placement(twitter, instagram_map, name="orders.id")
    assert route_fits(ByModulo(64), LocalityUUIDGenerator()) is not None
    assert route_fits(ByLocalityBlock(64), LocalityUUIDGenerator()) is None
    assert route_fits(ByModulo(64), twitter) is None
    assert route_fits(ByField(TWITTER, "datacenter"), twitter) is None
    assert route_fits(ByDecimalServer(DECIMAL), twitter) is not None
    assert route_fits(route_for(UniqIdGenerator(3)), UniqIdGenerator(4)) is not None


def test_writes_off_the_ids_database_are_refused_naming_both() -> None:
    generator = _sharded()
    placement = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    value = generator.next_id(shard=0)
    placement.check_write(value, "shard_0")
    with pytest.raises(WrongShardError, match=r"shard_0.*shard_3") as caught:
        placement.check_write(value, "shard_3")
    assert (caught.value.expected, caught.value.database) == ("shard_0", "shard_3")


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_any_key_picks_a_logical_shard_in_range(key: int) -> None:
    generator = _GEN
    shard = _PLACEMENT.logical_shard_for_key(key)
    assert 0 <= shard < generator.logical_shards
    assert _PLACEMENT.logical_shard_for_key(str(key)) == shard


_GEN = ShardedIdGenerator(INSTAGRAM)
_PLACEMENT = Placement(_GEN, ShardMap(DBS, route=route_for(_GEN)))
