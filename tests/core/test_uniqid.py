"""Shard-prefixed uniqids: PHP's uniqid() format with a shard digit and random prefix."""

from __future__ import annotations

import pytest

from uid_fields import ClockMovedBackwardsError, ManualClock, UniqIdGenerator, uniqid


def test_format_is_shard_prefix_then_php_uniqid() -> None:
    clock = ManualClock(0)
    clock.set_ns(1_700_000_000_123_456_000)
    gen = UniqIdGenerator(4, clock=clock)
    value = gen.next_id()
    seconds, micros = 1_700_000_000, 123_456
    # php-src ext/standard/uniqid.c: "%08x%05x" of seconds and microseconds.
    assert value[5:] == f"{seconds:08x}{micros:05x}"
    assert value[0] == str(micros % 4)
    assert len(value) == 18 and value == value.lower()
    parts = gen.decompose(value)
    assert parts.timestamp_us == seconds * 1_000_000 + micros
    assert parts.datetime.isoformat() == "2023-11-14T22:13:20.123456+00:00"


def test_same_microsecond_waits_for_the_next() -> None:
    clock = ManualClock(1_700_000_000_000)
    gen = UniqIdGenerator(10, clock=clock)
    ids = gen.next_ids(50)
    micros = [uniqid.decompose(v, 10).timestamp_us for v in ids]
    assert micros == list(range(micros[0], micros[0] + 50))
    assert {uniqid.decompose(v, 10).shard for v in ids} == set(range(10))


def test_clock_rollback_policy() -> None:
    clock = ManualClock(1_700_000_000_000)
    gen = UniqIdGenerator(4, clock=clock, max_backward_ms=10)
    gen.next_id()
    clock.set_ms(1_699_999_000_000)
    with pytest.raises(ClockMovedBackwardsError):
        gen.next_id()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1abc", "18 characters"),
        ("x" * 18, "digit and lowercase hex"),
        ("1ABCD6557d8a00f0d1", "digit and lowercase hex"),
        ("0abcd6557d8a0fffff", "over a second"),
        ("3abcd6557d8a001e240", "18 characters"),
    ],
)
def test_malformed(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        uniqid.decompose(value, 4)


def test_shard_digit_must_match_microseconds() -> None:
    good = uniqid.compose(timestamp_us=1_700_000_000_000_001, prefix=0xABCD, total_shards=4)
    assert good[0] == "1"
    with pytest.raises(ValueError, match="should be 1"):
        uniqid.decompose("2" + good[1:], 4)


def test_total_shards_is_one_digit() -> None:
    with pytest.raises(ValueError, match=r"1\.\.10"):
        UniqIdGenerator(11)
