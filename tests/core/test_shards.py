"""Shard maps: routing by embedded bits, mixed modulo spread, explicit ranges."""

from __future__ import annotations

from collections import Counter

import pytest

from uid_fields import (
    INSTAGRAM,
    TWITTER,
    LocalityUUIDGenerator,
    ManualClock,
    ShardedIdGenerator,
    ShardMap,
    SnowflakeGenerator,
    UniqIdGenerator,
)
from uid_fields._internal.hashing import mix64
from uid_fields.config import build_shard_map, replicas_of, shard_map_problems
from uid_fields.ids.layouts import DECIMAL, SnowflakeLayout
from uid_fields.placement import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    ByUniqIdDigit,
)

DBS = ["shard_0", "shard_1", "shard_2", "shard_3"]
NOW_MS = 1_735_689_600_000


def chi_square_uniform(counts: Counter[str], buckets: int, total: int) -> float:
    expected = total / buckets
    return sum((counts.get(b, 0) - expected) ** 2 / expected for b in DBS[:buckets])


# chi-square critical value for 3 degrees of freedom at p = 0.001
CHI2_3DF_P001 = 16.27


def test_low_traffic_snowflakes_spread_evenly_with_the_mixed_modulo() -> None:
    # One id every 3 ms: every sequence is 0, so the low bits carry no entropy.
    clock = ManualClock(NOW_MS)
    gen = SnowflakeGenerator(TWITTER, worker=1, clock=clock)
    ids = []
    for _ in range(4000):
        ids.append(gen.next_id())
        clock.advance_ms(3)
    assert {TWITTER.decompose(i).sequence for i in ids} == {0}
    plain = Counter(DBS[i % 4] for i in ids)
    assert plain == Counter({"shard_0": 4000})  # why a plain modulo fails
    shard_map = ShardMap(DBS, route=ByModulo())
    mixed = Counter(shard_map.database_for(i) for i in ids)
    assert chi_square_uniform(mixed, 4, 4000) < CHI2_3DF_P001, mixed


def test_high_traffic_snowflakes_spread_evenly() -> None:
    ids = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS)).next_ids(40_000)
    counts = Counter(ShardMap(DBS, route=ByModulo()).database_for(i) for i in ids)
    assert chi_square_uniform(counts, 4, 40_000) < CHI2_3DF_P001, counts


def test_mix64_is_stable_across_processes() -> None:
    # Fixed outputs: routing must never depend on hash() randomisation.
    assert mix64(0) == 0
    assert mix64(1) == 0x5692161D100B05E5
    assert mix64(2**63 - 1) == mix64(2**63 - 1 + 2**64)


def test_embedded_shard_bits_route_and_keep_an_owner_together() -> None:
    gen = ShardedIdGenerator(INSTAGRAM, clock=ManualClock(NOW_MS))
    shard_map = ShardMap(DBS, route=ByField(INSTAGRAM, "shard"))
    assert shard_map.logical_shards == 8192
    owner_ids = [gen.next_id(shard_key=31341) for _ in range(100)]
    assert {shard_map.database_for(i) for i in owner_ids} == {shard_map.database(31341 % 8192)}
    assert shard_map.database(0) == "shard_0" and shard_map.database(8191) == "shard_3"
    assert shard_map.database(2048) == "shard_1"
    spread = Counter(shard_map.database_for(gen.next_id(shard=s)) for s in range(8192))
    assert set(spread.values()) == {2048}


def test_route_by_a_named_node_field() -> None:
    shard_map = ShardMap(["east", "west"], route=ByField(TWITTER, "datacenter"))
    gen = SnowflakeGenerator(TWITTER, datacenter=20, clock=ManualClock(NOW_MS))
    assert shard_map.database_for(gen.next_id()) == "west"


def test_explicit_ranges_validate_cover() -> None:
    route = ByModulo(8)
    shard_map = ShardMap(route=route, ranges={"old": (0, 6), "new": range(6, 8)})
    assert [shard_map.database(i) for i in range(8)] == ["old"] * 6 + ["new"] * 2
    with pytest.raises(ValueError, match="mapped twice"):
        ShardMap(route=route, ranges={"a": (0, 5), "b": (4, 8)})
    with pytest.raises(ValueError, match="map to no database"):
        ShardMap(route=route, ranges={"a": (0, 5), "b": (6, 8)})
    with pytest.raises(ValueError, match="outside"):
        ShardMap(route=route, ranges={"a": (0, 9)})
    with pytest.raises(ValueError, match="cannot share"):
        ShardMap(["a", "b", "c"], route=ByModulo(2))
    with pytest.raises(TypeError, match="either"):
        ShardMap(DBS, route=route, ranges={"a": (0, 8)})


def test_group_keeps_input_order_per_database() -> None:
    shard_map = ShardMap(DBS, route=ByModulo())
    ids = list(range(10**15, 10**15 + 50))
    groups = shard_map.group(ids)
    assert sorted(i for g in groups.values() for i in g) == ids
    for alias, members in groups.items():
        assert members == sorted(members)
        assert all(shard_map.database_for(i) == alias for i in members)


def test_malformed_ids_are_value_errors() -> None:
    shard_map = ShardMap(DBS, route=ByField(INSTAGRAM))
    for bad in ["abc", "-1", str(2**63)]:
        with pytest.raises(ValueError):
            shard_map.database_for(bad)


def test_locality_variable_spreads_sequential_clusters() -> None:
    shard_map = ShardMap(DBS, route=ByLocalityBlock(16))
    variable = LocalityUUIDGenerator(pid=1, mac=1).next_ids(400)
    assert set(Counter(shard_map.database_for(u) for u in variable).values()) == {100}
    sequential = LocalityUUIDGenerator(sequential=True, pid=1, mac=1).next_ids(400)
    assert len({shard_map.database_for(u) for u in sequential}) <= 2
    with pytest.raises(ValueError):
        shard_map.database_for("not-a-uuid")


def test_uniqid_and_decimal_routes() -> None:
    gen = UniqIdGenerator(4)
    shard_map = ShardMap(DBS, route=ByUniqIdDigit(4))
    for value in gen.next_ids(20):
        assert shard_map.database_for(value) == DBS[int(value[0])]
    decimal_map = ShardMap(["a", "b"], route=ByDecimalServer(DECIMAL))
    assert decimal_map.database_for(DECIMAL.compose(timestamp_ms=DECIMAL.epoch_ms, server=7)) == "b"


def test_incoming_databases_own_nothing_until_a_map_gives_them_a_range() -> None:
    route = ByField(INSTAGRAM, "shard")
    before = ShardMap(["shard_0", "shard_1"], route=route, incoming=["shard_2", "shard_2"])
    assert before.incoming == ("shard_2",) and "shard_2" not in before.databases
    assert before.migrated_databases == ("shard_0", "shard_1", "shard_2")  # gets the tables
    ids = ShardedIdGenerator(INSTAGRAM)
    assert {before.database_for(ids.next_id(shard=s)) for s in range(8192)} == {
        "shard_0",
        "shard_1",
    }
    after = ShardMap(
        route=route,
        ranges={"shard_0": (0, 4096), "shard_1": (4096, 6144), "shard_2": (6144, 8192)},
        incoming=["shard_2"],  # left in the settings after the switch: it owns a range now
    )
    assert after.incoming == () and after.database(7000) == "shard_2"
    assert after.migrated_databases == after.databases
    with pytest.raises(TypeError, match="list of aliases"):
        ShardMap(["shard_0"], route=route, incoming="shard_1")
    problems = shard_map_problems("main", {"databases": ["shard_0"], "incoming": "shard_1"})
    assert [(p.path, p.code) for p in problems] == [("SHARDS.main.incoming", "E014")]


def test_a_map_names_read_replicas_per_database_in_either_form() -> None:
    described = {
        "databases": {
            "shard_0": {"primary": "shard_0", "replicas": []},
            "shard_1": {"primary": "shard_1", "replicas": ["shard_1_r1"]},
        }
    }
    short = {"databases": ["shard_0", "shard_1"], "replicas": {"shard_1": ["shard_1_r1"]}}
    for entry in (described, short):
        assert shard_map_problems("main", entry) == []
        assert replicas_of(entry) == {"shard_1": ["shard_1_r1"]}
        built = build_shard_map(entry, ShardedIdGenerator(INSTAGRAM))
        assert built.databases == ("shard_0", "shard_1")  # replicas own no logical shard
    wrong = {"databases": {"shard_0": {"primary": "shard_9", "replicas": ["r"]}}}
    assert [p.code for p in shard_map_problems("main", wrong)] == ["E014"]
    itself = {"databases": ["shard_0", "shard_1"], "replicas": {"shard_1": ["shard_0"]}}
    assert "not a replica" in shard_map_problems("main", itself)[0].message


# -- the size of a map is bounded ------------------------------------------------------------


class WideRoute:
    """A route over ``logical_shards`` logical shards, as a wide node field would give."""

    def __init__(self, logical_shards: int) -> None:
        self.logical_shards = logical_shards

    def logical_shard(self, value: object) -> int:
        return 0


def test_the_largest_routes_the_package_builds_fit_a_map() -> None:
    from uid_fields.ids.layouts import SONYFLAKE
    from uid_fields.placement import shards

    assert shards.MAX_LOGICAL_SHARDS == 2**16
    # Sonyflake's 16-bit machine field is the widest node field of any preset
    machine = ShardMap(["a", "b"], route=ByField(SONYFLAKE, "machine"))
    assert machine.logical_shards == 2**16 and machine.database(2**16 - 1) == "b"
    assert ShardMap(route=ByModulo(2**16), ranges={"a": (0, 2**16)}).databases == ("a",)
    assert ShardMap(DBS, route=ByField(INSTAGRAM)).logical_shards == 8192


@pytest.mark.parametrize("total", [2**16 + 1, 10**8, 3_978_134_014, 2**40])
def test_a_map_refuses_more_logical_shards_than_it_holds_before_allocating(total: int) -> None:
    import tracemalloc

    wide = SnowflakeLayout(epoch_ms=0, time_bits=20, fields=(("node", 40),), sequence_bits=2)
    routes = [WideRoute(total), ByModulo(total)] + (
        [ByField(wide, "node")] if total == 2**40 else []
    )
    for route in routes:
        tracemalloc.start()
        try:
            with pytest.raises(ValueError, match=r"65536 logical shards"):
                ShardMap(["a", "b"], route=route)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1 << 20, f"{peak} bytes allocated before refusing {total} logical shards"
        with pytest.raises(ValueError, match=r"65536 logical shards"):
            ShardMap(route=route, ranges={"a": (0, total)})
