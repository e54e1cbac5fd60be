"""What an id tells whoever sees it: the claims of docs/security.md, checked.

Each test plays the attacker with only public knowledge (the layouts, Groupon's public
step 198491317) and two or more ids, and recovers what the page says it can. The last
ones show that the public tokens of the same ids give none of it back.
"""

from __future__ import annotations

import itertools

from uid_fields import (
    DECIMAL,
    INSTAGRAM,
    TWITTER,
    DecimalGenerator,
    LocalityUUIDGenerator,
    ManualClock,
    PublicIdError,
    PublicIds,
    ShardedIdGenerator,
    SnowflakeGenerator,
    UniqIdGenerator,
    locality,
    uniqid,
)

STEP = 198491317  # Groupon's published counter step (variable mode)
STEP_INVERSE = pow(STEP, -1, 2**32)
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def ids_made_between(first: object, second: object) -> int:
    """How many ids one process made from ``first`` to ``second`` (variable mode).

    Java writes the counter's top nibble as f when the top bit is set (the README's
    ``...0ffc`` example), hiding 4 bits: the attacker tries all 16 values for each id
    and keeps the smallest count, which is the true one unless 2**32 ids were made.
    """

    def candidates(value: object) -> list[int]:
        counter = locality.decompose(value).counter
        if (counter >> 24) & 0xF != 0xF or not counter >> 31:
            return [counter]
        return [(counter & ~0x0F000000) | (nibble << 24) for nibble in range(16)]

    return min(
        ((b - a) * STEP_INVERSE) % 2**32
        for a, b in itertools.product(candidates(first), candidates(second))
    )


def test_two_locality_uuids_give_the_exact_count_between_them() -> None:
    generator = LocalityUUIDGenerator(
        pid=3141, mac="02:42:ac:11:00:02", clock=ManualClock(START_MS)
    )
    first = generator.next_id()
    made = generator.next_ids(12_344)
    second = generator.next_id()
    assert ids_made_between(first, second) == 12_345 == len(made) + 1
    # ... and each one its millisecond, its process and its host.
    parts = locality.decompose(second)
    assert parts.timestamp_ms == START_MS
    assert parts.pid == 3141 and parts.mac == locality.mac_bits("02:42:ac:11:00:02")


def test_the_count_survives_the_hidden_nibble() -> None:
    # Counters with the top bit set on both ends: their 7th hex digit reads f.
    start = (0xF7654321 - STEP) % 2**32  # Java adds the step, then writes: 0xf7654321 first
    generator = LocalityUUIDGenerator(pid=2718, mac="02:00:00:00:00:2a", counter=start)
    first = generator.next_id()
    for _ in range(999):
        generator.next_id()
    second = generator.next_id()
    assert locality.decompose(first).counter >> 31
    assert ids_made_between(first, second) == 1000


def test_sequential_locality_uuids_count_by_subtraction() -> None:
    generator = LocalityUUIDGenerator(
        sequential=True, pid=99, mac="02:00:00:00:00:63", clock=ManualClock(START_MS)
    )
    first, *_, last = generator.next_ids(501)
    assert locality.decompose(last).block - locality.decompose(first).block == 500


def test_a_snowflake_gives_its_millisecond_and_node() -> None:
    layout = TWITTER.replace(epoch_ms=1_704_067_200_000)
    generator = SnowflakeGenerator(layout, datacenter=3, worker=17, clock=ManualClock(START_MS))
    parts = layout.decompose(generator.next_ids(5)[-1])
    assert parts.timestamp_ms == START_MS
    assert (parts.datacenter, parts.worker, parts.sequence) == (3, 17, 4)


def test_instagram_ids_give_the_shard_and_the_per_shard_sequence() -> None:
    layout = INSTAGRAM.replace(epoch_ms=1_704_067_200_000)
    generator = ShardedIdGenerator(layout, clock=ManualClock(START_MS))
    made = [generator.next_id(shard_key=4242) for _ in range(10)]
    first, last = layout.decompose(made[0]), layout.decompose(made[-1])
    assert first.shard == last.shard == 4242  # every row of that key: one shard, linkable
    assert last.sequence - first.sequence == 9  # ids made on that shard in that ms


def test_decimal_ids_of_one_millisecond_count_by_their_random_digits() -> None:
    layout = DECIMAL.replace(epoch_ms=1_704_067_200_000)
    generator = DecimalGenerator(layout, server=3, clock=ManualClock(START_MS))
    first, *_, last = generator.next_ids(50)
    a, b = layout.decompose(first), layout.decompose(last)
    assert a.timestamp_ms == b.timestamp_ms == START_MS and a.server == b.server == 3
    assert b.random - a.random == 49


def test_uniqids_give_their_microsecond_and_shard() -> None:
    clock = ManualClock(START_MS)
    generator = UniqIdGenerator(4, clock=clock)
    a, b = generator.next_id(), generator.next_id()
    pa, pb = uniqid.decompose(a, 4), uniqid.decompose(b, 4)
    assert pa.timestamp_us == START_MS * 1000 and pb.timestamp_us == START_MS * 1000 + 1
    assert pa.shard == int(a[0])


def test_public_tokens_of_the_same_ids_give_none_of_it() -> None:
    generator = LocalityUUIDGenerator(pid=3141, mac="02:42:ac:11:00:03")
    first, second = generator.next_id(), generator.next_id()
    codec = PublicIds("evt", {1: "a secret the attacker does not have"})
    tokens = [codec.encode(first), codec.encode(second)]
    # Without the key a token is not even a UUID to decompose ...
    for token in tokens:
        try:
            locality.decompose(token)
        except ValueError:
            pass
        else:  # pragma: no cover - the test fails here
            raise AssertionError("a token read as a locality UUID")
    # ... and a guessed key reads nothing.
    guess = PublicIds("evt", {1: "the attacker's best guess at it"})
    for token in tokens:
        try:
            guess.decode(token)
        except PublicIdError:
            continue
        raise AssertionError("a token decoded under the wrong key")  # pragma: no cover
