"""Locality UUIDs, checked against Groupon's README and Java source."""

from __future__ import annotations

import hashlib
import itertools
import threading
import uuid
from datetime import UTC, datetime

import pytest

from uid_fields import LocalityUUIDGenerator, ManualClock, locality


def test_readme_example_decodes() -> None:
    # groupon/locality-uuid.java README: counter 3,488,672,514, pid 12,618,
    # MAC __:__:_d:53:7a:50, timestamp 1,350,327,498,450.
    parts = locality.decompose("20be0ffc-314a-bd53-7a50-013a65ca76d2")
    assert parts.counter == 3488672514
    assert parts.block == 0x20BE0FFC
    assert parts.pid == 12618
    assert parts.mac == 0xD537A50
    assert parts.timestamp_ms == 1350327498450
    assert parts.datetime == datetime(2012, 10, 15, 18, 58, 18, 450000, tzinfo=UTC)


def test_readme_sequential_example_matches_the_md5_seed() -> None:
    # README sequential-mode sample f5166777-7a7f-bd53-7a50-013e4e2afc26: its block
    # is the MD5 seed of its 10-minute window (2013042801 + "0") plus 2 increments.
    parts = locality.decompose("f5166777-7a7f-bd53-7a50-013e4e2afc26")
    digest = hashlib.md5(b"20130428010").digest()
    assert parts.block == int.from_bytes(digest[:4], "little") + 2
    assert locality.sequential_seed(parts.datetime) == parts.block - 2


def test_not_a_locality_uuid() -> None:
    # Java UUIDTest: the same text with a 7 in the version position is refused.
    with pytest.raises(ValueError, match="version nibble is 7"):
        locality.decompose("20be0ffc-314a-7d53-7a50-013a65ca76d2")
    with pytest.raises(ValueError, match="not a UUID"):
        locality.decompose("20be0ffc-314a-bd53-7a50-013a65ca76dz")
    with pytest.raises(TypeError):
        locality.decompose(12345)


def test_not_rfc_4122() -> None:
    value = LocalityUUIDGenerator(pid=1, mac=0x1234567).next_id()
    assert value.version is None or value.variant != uuid.RFC_4122


def test_variable_mode_is_java_arithmetic() -> None:
    clock = ManualClock(1_700_000_000_123)
    gen = LocalityUUIDGenerator(pid=12618, mac="00:00:0d:53:7a:50", clock=clock)
    ids = gen.next_ids(64)
    counters = [locality.decompose(u).counter for u in ids]
    for a, b in itertools.pairwise(counters):
        if a < 2**31 and b < 2**31:  # a top bit set hides one nibble, as in Java
            assert (b - a) % 2**32 == locality.INCREMENT
    # The written block is the counter nibble-reversed: its first hex digit is the
    # counter's lowest nibble, which cycles +5 (mod 16) and so visits all 16 values.
    first_chars = [str(u)[0] for u in ids[:16]]
    assert len(set(first_chars)) == 16
    ms = f"{1_700_000_000_123:012x}"
    assert {str(u)[8:] for u in ids} == {f"-314a-bd53-7a50-{ms}"}
    assert locality.decompose(ids[0]).timestamp_ms == 1_700_000_000_123


def test_sequential_mode_counts_up_from_the_window_seed() -> None:
    clock = ManualClock(1_367_110_999_000)  # 2013-04-28T01:03:19Z, window "20130428010"
    gen = LocalityUUIDGenerator(sequential=True, pid=31359, mac=0xD537A50, clock=clock)
    ids = gen.next_ids(8)
    seed = int.from_bytes(hashlib.md5(b"20130428010").digest()[:4], "little")
    assert [locality.decompose(u).block for u in ids] == [seed + 1 + i for i in range(8)]
    assert str(ids[1]).startswith("f5166777-7a7f-bd53-7a50-")  # as in the README


def test_pid_and_mac_overrides_are_range_checked() -> None:
    with pytest.raises(ValueError, match=r"pid=65536 is out of range 0\.\.65535"):
        LocalityUUIDGenerator(pid=65536)
    with pytest.raises(ValueError, match="MAC address"):
        LocalityUUIDGenerator(mac="zz:zz")
    with pytest.raises(ValueError, match="mac="):
        LocalityUUIDGenerator(mac=2**28)


def test_million_ids_and_ten_threads_unique_by_value() -> None:
    # Compare values (ints), not objects: the Ruby port's Set test was vacuous.
    gen = LocalityUUIDGenerator()
    single = {u.int for u in gen.next_ids(200_000)}
    assert len(single) == 200_000
    results: list[list[int]] = [[] for _ in range(10)]

    def work(slot: int) -> None:
        results[slot] = [gen.next_id().int for _ in range(50_000)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    together = [v for chunk in results for v in chunk]
    assert len(set(together) | single) == 700_000


def test_values_are_plain_uuids() -> None:
    value = LocalityUUIDGenerator().next_id()
    assert type(value) is uuid.UUID
    assert uuid.UUID(str(value)) == value and hash(uuid.UUID(str(value))) == hash(value)


def test_two_generators_with_the_same_pid_and_mac_never_collide() -> None:
    # The Java class has one static counter per process; so must we, per (pid, MAC).
    for sequential in (False, True):
        a = LocalityUUIDGenerator(sequential=sequential, pid=4242, mac=0x42)
        b = LocalityUUIDGenerator(sequential=sequential, pid=4242, mac=0x42)
        ids = [u.int for _ in range(500) for u in (a.next_id(), b.next_id())]
        assert len(set(ids)) == 1000


@pytest.mark.parametrize(
    ("counter", "pid", "expected"),
    [
        (
            0,
            11166,
            [
                "5bcb4db0-2b9e-b000-0001-018bcfe56800",
                "a6979a71-2b9e-b000-0001-018bcfe56801",
                "f163e732-2b9e-b000-0001-018bcfe56802",
            ],
        ),
        (
            2147483648,
            11204,
            [
                "5bcb4df8-2bc4-b000-0001-018bcfe56800",
                "a6979af9-2bc4-b000-0001-018bcfe56801",
                "f163e7fa-2bc4-b000-0001-018bcfe56802",
            ],
        ),
    ],
)
def test_variable_mode_matches_groupons_java_byte_for_byte(
    counter: int, pid: int, expected: list[str]
) -> None:
    clock = ManualClock(1_700_000_000_000)
    gen = LocalityUUIDGenerator(pid=pid, mac="02:fc:00:00:00:01", clock=clock, counter=counter)
    made = []
    for _ in expected:
        made.append(str(gen.next_id()))
        clock.advance_ms(1)
    assert made == expected


def test_a_starting_counter_cannot_restart_a_running_one() -> None:
    LocalityUUIDGenerator(pid=4242, mac="02:fc:00:00:00:09", counter=7).next_id()
    with pytest.raises(ValueError, match="already running"):
        LocalityUUIDGenerator(pid=4242, mac="02:fc:00:00:00:09", counter=7)
    with pytest.raises(ValueError):
        LocalityUUIDGenerator(pid=4243, mac="02:fc:00:00:00:09", counter=2**32)
