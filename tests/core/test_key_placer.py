"""The placer an ORM's construction hook binds once (``Placement.key_placer``) and the
generator's short path for the first id of a time unit, both built for keyed writes of
many distinct keys: each must give the answers of the general path it stands in for."""

from __future__ import annotations

import threading
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uid_fields import (
    INSTAGRAM,
    ClockMovedBackwardsError,
    ManualClock,
    ShardedIdGenerator,
    ShardKeyError,
    ShardMap,
    SnowflakeGenerator,
)
from uid_fields.ids.layouts import TWITTER
from uid_fields.placement import ByField, Placement

DBS = ["shard_0", "shard_1", "shard_2", "shard_3"]
NOW_MS = 1_735_689_600_000
KEYS = st.one_of(
    st.integers(-(1 << 63), (1 << 64) - 1),
    st.integers(0, 10_000),
    st.integers(0, 10**12).map(str),
    st.uuids(),
)


def _placement(key_hash: str = "mixed", closed: tuple[str, ...] = ()) -> Placement:
    generator = ShardedIdGenerator(INSTAGRAM, clock=ManualClock(NOW_MS, step_ns=50_000))
    shard_map = ShardMap(DBS, route=ByField(INSTAGRAM, "shard"), closed=closed)
    return Placement(generator, shard_map, key_hash=key_hash)  # type: ignore[arg-type]


@pytest.mark.parametrize("key_hash", ["mixed", "modulo"])
@given(keys=st.lists(KEYS, min_size=1, max_size=40))
def test_the_bound_placer_places_every_key_as_new_placed_id(
    key_hash: str, keys: list[object]
) -> None:
    placement = _placement(key_hash)
    place = placement.key_placer()
    assert place is placement.key_placer()  # built once per placement
    for key in keys:
        value, database = place(key)
        assert placement.logical_shard_of(value) == placement.logical_shard_for_key(key)
        assert database == placement.database_for_key(key) == placement.database_of(value)
        other, other_database = placement.new_placed_id(key)
        assert placement.logical_shard_of(other) == placement.logical_shard_of(value)
        assert other_database == database


@pytest.mark.parametrize("key", [True, 1.5, "", "x1", 1 << 64, -(1 << 63) - 1, None])
def test_the_bound_placer_refuses_what_the_general_path_refuses(key: object) -> None:
    placement = _placement()
    place = placement.key_placer()
    if key is None:  # no key: the keyless choice, as new_placed_id makes it
        value, database = place(key)
        assert database == placement.database_of(value)
        return
    with pytest.raises(ShardKeyError):
        placement.new_placed_id(key)
    with pytest.raises(ShardKeyError):
        place(key)


def test_closed_databases_and_parents_keep_the_general_path() -> None:
    closed = _placement(closed=("shard_1",))
    assert closed.key_placer() == closed.new_placed_id
    for key in range(200):
        assert closed.key_placer()(key)[1] != "shard_1"
    parent = _placement()
    child = Placement(parent.generator, parent.shard_map, parent=parent)
    assert child.key_placer() == child.new_placed_id


def test_the_first_id_of_each_unit_keeps_the_generators_promises() -> None:
    """The short path for the first id of a later time unit: ids still increase, the
    unit's block continues after it, and a clock that went back is still waited out
    (or refused past max_backward_ms)."""
    clock = ManualClock(NOW_MS)
    generator = SnowflakeGenerator(TWITTER, clock=clock, max_backward_ms=5, worker=1)
    seen: list[int] = []
    for _ in range(50):
        clock.advance_ms(1)
        seen += [generator.next_id() for _ in range(3)]
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    parts = [generator.decompose(v) for v in seen[:3]]
    assert [p.sequence for p in parts] == [0, 1, 2]  # first of the unit, then its block
    clock.advance_ms(-3)  # back, within max_backward_ms: waited out, still increasing
    after = generator.next_id()
    assert after > seen[-1]
    clock.advance_ms(-50)
    with pytest.raises(ClockMovedBackwardsError):
        generator.next_id()


def test_threads_starting_units_on_many_shards_never_repeat_an_id() -> None:
    """Many threads asking one sharded generator for ids of many logical shards, each
    call nearly always the first of its shard in that unit (the keyed-write case)."""
    clock = ManualClock(NOW_MS, step_ns=20_000)
    generator = ShardedIdGenerator(INSTAGRAM, clock=clock)
    out: list[list[int]] = [[] for _ in range(6)]

    def work(n: int) -> None:
        for i in range(3000):
            out[n].append(generator.next_id(shard=(i * 7 + n) % 512))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [v for ids in out for v in ids]
    assert len(set(every)) == len(every)
    for ids in out:  # per shard, one thread's ids increase
        by_shard: dict[int, list[int]] = {}
        for value in ids:
            by_shard.setdefault(generator.shard_of(value), []).append(value)
        assert all(values == sorted(values) for values in by_shard.values())


def test_a_uuid_key_and_its_digit_string_share_a_placement() -> None:
    placement = _placement()
    key = uuid.UUID(int=123456789)
    place = placement.key_placer()
    assert place(key)[1] == place(str(key.int))[1] == place(key.int)[1]
