"""Hypothesis: layouts round-trip, bounds bracket, order follows time, decoding never crashes."""

from __future__ import annotations

import uuid

from hypothesis import assume, given
from hypothesis import strategies as st

from uid_fields import DECIMAL, TWITTER, DecimalLayout, SnowflakeLayout, locality, uniqid
from uid_fields.ids.layouts import SIGNED_MAX

names = st.sampled_from(["worker", "datacenter", "shard", "process", "machine", "region", "rack"])


@st.composite
def snowflake_layouts(draw: st.DrawFn) -> SnowflakeLayout:
    chosen = draw(st.lists(names, unique=True, max_size=4))
    split = draw(st.integers(0, len(chosen)))
    widths = [draw(st.integers(1, 10)) for _ in chosen]
    sequence_bits = draw(st.integers(0, 16))
    used = sum(widths) + sequence_bits
    time_bits = draw(st.integers(8, max(8, 64 - used)))
    assume(time_bits + used <= 64)
    return SnowflakeLayout(
        epoch_ms=draw(st.integers(0, 1_800_000_000_000)),
        time_bits=time_bits,
        fields=tuple(zip(chosen[:split], widths[:split], strict=True)),
        sequence_bits=sequence_bits,
        low_fields=tuple(zip(chosen[split:], widths[split:], strict=True)),
        time_unit_ms=draw(st.sampled_from([1, 10, 1000])),
        unsigned=draw(st.booleans()),
    )


@st.composite
def layout_and_parts(draw: st.DrawFn) -> tuple[SnowflakeLayout, int, int, dict[str, int]]:
    layout = draw(snowflake_layouts())
    unit = draw(st.integers(0, layout.max_unit))
    ts = (
        layout.epoch_ms + unit * layout.time_unit_ms + draw(st.integers(0, layout.time_unit_ms - 1))
    )
    fields = {n: draw(st.integers(0, (1 << layout.field_bits(n)) - 1)) for n in layout.field_names}
    sequence = draw(st.integers(0, layout.max_sequence))
    return layout, ts, sequence, fields


@given(layout_and_parts())
def test_compose_decompose_round_trip(
    case: tuple[SnowflakeLayout, int, int, dict[str, int]],
) -> None:
    layout, ts, sequence, fields = case
    value = layout.compose(timestamp_ms=ts, sequence=sequence, **fields)
    assert 0 <= value <= layout.max_value
    parts = layout.decompose(value)
    unit_start = ts - (ts - layout.epoch_ms) % layout.time_unit_ms
    assert parts.timestamp_ms == unit_start
    assert parts.sequence == sequence
    assert parts.fields == fields
    assert layout.min_id(ts) <= value <= layout.max_id(ts)
    assert layout.timestamp_ms_of(value) == unit_start


@given(layout_and_parts(), st.integers(1, 10**6))
def test_later_time_means_larger_id(
    case: tuple[SnowflakeLayout, int, int, dict[str, int]], delta: int
) -> None:
    layout, ts, sequence, fields = case
    later = ts + delta * layout.time_unit_ms
    assume((later - layout.epoch_ms) // layout.time_unit_ms <= layout.max_unit)
    first = layout.compose(timestamp_ms=ts, sequence=sequence, **fields)
    # Any id of a later unit, whatever its other parts, is larger.
    assert layout.min_id(later) > first
    assert layout.max_id(ts) < layout.min_id(later)


@given(snowflake_layouts())
def test_lifetime_is_the_first_instant_that_does_not_fit(layout: SnowflakeLayout) -> None:
    last_ms = layout.epoch_ms + layout.max_unit * layout.time_unit_ms
    assert layout.max_id(last_ms) <= layout.max_value
    assert layout.max_id(last_ms) <= (SIGNED_MAX if not layout.unsigned else 2**64 - 1)
    end = layout.epoch_ms + (layout.max_unit + 1) * layout.time_unit_ms
    assert layout.min_id(end, clamp=True) == layout.max_value + 1


@given(
    st.integers(0, 10**12),
    st.integers(0, 999_999),
    st.integers(0, 9),
    st.booleans(),
)
def test_decimal_round_trip(unit: int, random: int, server: int, unsigned: bool) -> None:
    layout = DECIMAL.replace(unsigned=unsigned)
    assume(unit <= layout.max_unit)
    ts = layout.epoch_ms + unit
    value = layout.compose(timestamp_ms=ts, random=random, server=server)
    assert value == int(f"{unit}{random:06d}{server}")
    parts = layout.decompose(value)
    assert (parts.timestamp_ms, parts.random, parts.server) == (ts, random, server)
    assert layout.min_id(ts) <= value <= layout.max_id(ts)


@given(st.integers(1, 13), st.integers(0, 9), st.integers(0, 3), st.sampled_from([1, 1000]))
def test_decimal_layouts_any_digits(
    time_digits: int, random_digits: int, server_digits: int, unit_ms: int
) -> None:
    layout = DecimalLayout(
        epoch_ms=0,
        time_digits=time_digits,
        random_digits=random_digits,
        server_digits=server_digits,
        time_unit_ms=unit_ms,
    )
    last = layout.max_id(layout.max_unit * unit_ms)
    assert last <= layout.max_value
    assert layout.decompose(last).random == layout.max_random


@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 0xFFFF),
    st.integers(0, 2**28 - 1),
    st.integers(0, 2**48 - 1),
    st.booleans(),
)
def test_locality_round_trip(counter: int, pid: int, mac: int, ms: int, sequential: bool) -> None:
    value = locality.compose(
        counter=counter, pid=pid, mac=mac, timestamp_ms=ms, sequential=sequential
    )
    parts = locality.decompose(str(value))
    assert (parts.pid, parts.mac, parts.timestamp_ms) == (pid, mac, ms)
    # Java's signed shift writes f for the counter's 7th nibble when its top bit is set.
    lost = 0x0F000000 if counter >> 31 and not sequential else 0
    assert (parts.block if sequential else parts.counter) == counter | lost
    assert str(value)[14] == "b"


@given(st.integers(0, 2**32 - 1))
def test_nibble_reversal_is_an_involution_and_reverses_hex(value: int) -> None:
    reversed_value = locality.reverse_nibbles(value)
    assert f"{reversed_value:08x}" == f"{value:08x}"[::-1]
    assert locality.reverse_nibbles(reversed_value) == value


@given(st.integers(0, 0xFFFFFFFF * 1_000_000 + 999_999), st.integers(0, 0xFFFF), st.integers(1, 10))
def test_uniqid_round_trip(timestamp_us: int, prefix: int, total: int) -> None:
    value = uniqid.compose(timestamp_us=timestamp_us, prefix=prefix, total_shards=total)
    assert len(value) == 18
    parts = uniqid.decompose(value, total)
    assert (parts.timestamp_us, parts.prefix) == (timestamp_us, prefix)
    assert parts.shard == (timestamp_us % 1_000_000) % total


# -- decode fuzzing: malformed input is a ValueError (or TypeError for non-strings), nothing else


@given(st.one_of(st.text(max_size=40), st.integers(-(2**70), 2**70)))
def test_decode_fuzz_int_layouts(value: object) -> None:
    for layout in (TWITTER, DECIMAL):
        try:
            parts = layout.decompose(value)
        except ValueError:
            continue
        assert 0 <= parts.value <= layout.max_value


@given(st.one_of(st.text(max_size=40), st.binary(min_size=16, max_size=16)))
def test_decode_fuzz_locality(value: object) -> None:
    try:
        parts = locality.decompose(value)
    except ValueError:
        return
    assert isinstance(parts.value, uuid.UUID)


@given(st.text(max_size=30), st.integers(1, 10))
def test_decode_fuzz_uniqid(value: str, total: int) -> None:
    try:
        parts = uniqid.decompose(value, total)
    except ValueError:
        return
    assert parts.value == value


TINY = SnowflakeLayout(epoch_ms=1000, time_bits=6, sequence_bits=3, time_unit_ms=10)


@given(
    st.sampled_from([">=", ">", "<=", "<"]),
    st.integers(0, 2**9 - 1),
    st.integers(0, 1000 + 70 * 10),
)
def test_time_condition_is_the_time_comparison(op: str, value: int, at_ms: int) -> None:
    # Every instant, inside the lifetime or not, against every id of a tiny layout.
    id_unit = value >> TINY.time_shift
    at_unit = (at_ms - TINY.epoch_ms) // TINY.time_unit_ms
    expected = {
        ">=": id_unit >= at_unit,
        ">": id_unit > at_unit,
        "<=": id_unit <= at_unit,
        "<": id_unit < at_unit,
    }[op]
    condition = TINY.time_condition(op, at_ms)
    if isinstance(condition, bool):
        assert condition is expected
    else:
        cond_op, bound = condition
        assert 0 <= bound <= TINY.max_value
        got = {">=": value >= bound, ">": value > bound, "<=": value <= bound, "<": value < bound}
        assert got[cond_op] is expected
