"""Public ids: a keyed permutation of the id space, with the key version and the model's
prefix in the token, and tokens that are foreign, truncated or tampered refused.

Known-answer vectors (``tests/vectors/public_ids.json``) pin the construction: a change
to the key derivation, the round function, the rounds or the alphabet changes every
token users have handed out, and must fail here first.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import string
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uid_fields import (
    TWITTER,
    ConfigurationError,
    LocalityUUIDGenerator,
    ManualClock,
    PublicIdError,
    PublicIds,
    SnowflakeGenerator,
    UidConfig,
)
from uid_fields.config import validate
from uid_fields.errors import UidFieldsError
from uid_fields.ids import public

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "public_ids.json"
KEY_1 = "test key one, 32 bytes long ...."
KEY_2 = b"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
INT_TOKEN = re.compile(r"ord_[0-9a-hjkmnp-tv-z]{21}")
UUID_TOKEN = re.compile(r"ord_[0-9a-hjkmnp-tv-z]{33}")
MAX64 = 2**64 - 1
MS = 1_800_000_000_000  # 2027-01-15, a stopped clock for runs of consecutive ids

ORD = PublicIds("ord", {1: KEY_1})
ORD_2 = PublicIds("ord", {1: KEY_1, 2: KEY_2})


def load_vectors() -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = json.loads(VECTORS.read_text())
    assert vectors and all(v.get("source") for v in vectors)
    return vectors


def codec_of(vector: dict[str, Any]) -> PublicIds:
    keys = {int(version): bytes.fromhex(secret) for version, secret in vector["keys"].items()}
    return PublicIds(vector["prefix"], keys)


def value_of(vector: dict[str, Any]) -> int | uuid.UUID:
    return uuid.UUID(vector["uuid"]) if "uuid" in vector else int(vector["id"])


# -- known answers ---------------------------------------------------------------------
def test_vectors_cover_ints_uuids_rotation_and_the_ends_of_the_range() -> None:
    vectors = load_vectors()
    ints = [int(v["id"]) for v in vectors if "id" in v]
    assert 0 in ints and MAX64 in ints and 2**63 - 1 in ints
    assert any("uuid" in v for v in vectors)
    assert any(len(v["keys"]) == 2 for v in vectors)
    assert len({v["prefix"] for v in vectors}) >= 2


@pytest.mark.parametrize("vector", load_vectors() if VECTORS.exists() else [])
def test_known_answer(vector: dict[str, Any]) -> None:
    codec = codec_of(vector)
    value = value_of(vector)
    assert codec.decode(vector["token"]) == value
    if vector.get("encodes", True):
        assert codec.encode(value) == vector["token"]


# -- round trips -----------------------------------------------------------------------
@given(st.integers(min_value=0, max_value=MAX64))
def test_every_64_bit_id_round_trips(value: int) -> None:
    token = ORD.encode(value)
    assert INT_TOKEN.fullmatch(token), token
    assert ORD.decode(token) == value
    assert type(ORD.decode(token)) is int
    assert ORD.decode_int(token) == value


@given(st.uuids(version=None) | st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)))
def test_every_uuid_round_trips(value: uuid.UUID) -> None:
    token = ORD.encode(value)
    assert UUID_TOKEN.fullmatch(token), token
    assert ORD.decode(token) == value
    assert type(ORD.decode(token)) is uuid.UUID
    assert ORD.decode_uuid(token) == value


def test_locality_uuids_and_snowflakes_round_trip() -> None:
    for value in LocalityUUIDGenerator(pid=4242, mac="02:00:00:00:00:07").next_ids(50):
        assert ORD.decode(ORD.encode(value)) == value
    for value in SnowflakeGenerator(TWITTER, datacenter=1, worker=2).next_ids(50):
        assert ORD.decode(ORD.encode(value)) == value


def test_tokens_are_deterministic_and_distinct() -> None:
    values = list(range(1000))
    tokens = [ORD.encode(v) for v in values]
    assert tokens == [ORD.encode(v) for v in values]
    assert len(set(tokens)) == len(tokens)
    assert PublicIds("ord", {1: KEY_1}).encode(12345) == ORD.encode(12345)


def test_decoding_reads_case_and_crockford_look_alikes() -> None:
    token = next(
        t
        for t in (ORD.encode(v) for v in range(1000))
        if "1" in t[4:] and "0" in t[4:] and any(c.isalpha() for c in t[4:])
    )
    assert ORD.decode(token.upper()) == ORD.decode(token)
    assert ORD.decode("ORD_" + token[4:]) == ORD.decode(token)
    for one in "IiLl":
        assert ORD.decode(token[:4] + token[4:].replace("1", one)) == ORD.decode(token)
    for zero in "Oo":
        assert ORD.decode(token[:4] + token[4:].replace("0", zero)) == ORD.decode(token)


# -- key versions ----------------------------------------------------------------------
def test_rotation_new_tokens_use_the_newest_key_and_old_tokens_still_decode() -> None:
    value = 1_234_567_890_123
    old = ORD.encode(value)
    new = ORD_2.encode(value)
    assert old != new
    assert old[-1] == "1" and new[-1] == "2"  # the version is the token's last character
    assert ORD_2.version == 2 and ORD_2.versions == (1, 2)
    assert ORD_2.decode(old) == value
    assert ORD_2.decode(new) == value
    with pytest.raises(PublicIdError, match="version"):
        ORD.decode(new)  # a process that does not have key 2 yet
    retired = PublicIds("ord", {2: KEY_2})
    with pytest.raises(PublicIdError, match="version"):
        retired.decode(old)


def test_a_token_under_one_version_is_refused_under_another() -> None:
    # Same secret under two version numbers: the version is authenticated, not just read.
    both = PublicIds("ord", {1: KEY_1, 2: KEY_1})
    token = both.encode(99)
    forged = token[:-1] + "1"
    with pytest.raises(PublicIdError):
        both.decode(forged)


def test_version_numbers_from_json_settings_are_accepted() -> None:
    assert PublicIds("ord", {"1": KEY_1}).encode(5) == ORD.encode(5)  # type: ignore[dict-item]


# -- foreign tokens --------------------------------------------------------------------
def test_a_token_of_another_prefix_is_refused() -> None:
    cus = PublicIds("cus", {1: KEY_1})
    token = ORD.encode(777)
    with pytest.raises(PublicIdError, match="prefix"):
        cus.decode(token)
    # Rewriting the prefix does not make it one: the prefix is bound into every round.
    with pytest.raises(PublicIdError):
        cus.decode("cus_" + token[4:])
    assert cus.encode(777)[4:] != token[4:]


def test_a_token_under_another_key_is_refused() -> None:
    other = PublicIds("ord", {1: "another secret of enough length"})
    for value in range(200):
        with pytest.raises(PublicIdError):
            other.decode(ORD.encode(value))


def test_an_int_token_is_no_uuid_token_and_back() -> None:
    ints = PublicIds("ord", {1: KEY_1}, kind="int")
    uuids = PublicIds("ord", {1: KEY_1}, kind="uuid")
    int_token = ORD.encode(5)
    uuid_token = ORD.encode(uuid.UUID(int=5))
    assert ints.decode(int_token) == 5
    assert uuids.decode(uuid_token) == uuid.UUID(int=5)
    with pytest.raises(PublicIdError):
        uuids.decode(int_token)
    with pytest.raises(PublicIdError):
        ints.decode(uuid_token)
    with pytest.raises(PublicIdError):
        ORD.decode_int(uuid_token)
    with pytest.raises(PublicIdError):
        ORD.decode_uuid(int_token)
    with pytest.raises(TypeError):
        ints.encode(uuid.UUID(int=5))
    with pytest.raises(TypeError):
        uuids.encode(5)


# -- tampering and truncation ----------------------------------------------------------
def _substitutes(char: str) -> list[str]:
    same = {"1": "1il", "0": "0o"}.get(char, char)
    return [c for c in CROCKFORD if c not in same]


@pytest.mark.parametrize("value", [0, 1, 2**40 + 17, MAX64, uuid.UUID(int=2**127 + 3)])
def test_every_changed_character_is_refused(value: int | uuid.UUID) -> None:
    token = ORD_2.encode(value)
    body_start = len("ord_")
    for index in range(body_start, len(token)):
        for char in _substitutes(token[index]):
            tampered = token[:index] + char + token[index + 1 :]
            with pytest.raises(PublicIdError):
                ORD_2.decode(tampered)


def test_truncated_and_extended_tokens_are_refused() -> None:
    for value in (3, uuid.UUID(int=3)):
        token = ORD.encode(value)
        for cut in range(1, len(token)):
            with pytest.raises(PublicIdError):
                ORD.decode(token[:cut])
        for extra in ("0", "z", "00", "_", "-"):
            with pytest.raises(PublicIdError):
                ORD.decode(token + extra)
        with pytest.raises(PublicIdError):
            ORD.decode(token[:4] + token[5:] + token[4])  # rotated body


def test_random_bodies_are_refused() -> None:
    # A forged body passes with probability 2**-36 (ints) or 2**-32 (UUIDs) per try:
    # 20,000 tries of each accept none (the chance that any would is below 1e-5).
    rng = random.Random(30)
    accepted = 0
    for length in (21, 33):
        for _ in range(20_000):
            body = "".join(rng.choice(CROCKFORD) for _ in range(length - 1)) + "1"
            try:
                ORD.decode("ord_" + body)
            except PublicIdError:
                continue
            accepted += 1
    assert accepted == 0


@pytest.mark.parametrize(
    "token",
    [
        "",
        "ord",
        "ord_",
        "_",
        "ord__",
        "ordxxxxxxxxxxxxxxxxxxxxxx",
        "ord_" + "0" * 20,
        "ord_" + "0" * 22,
        "ord_" + "u" * 21,
        "ord_" + "0" * 20 + "u",
        "ord_" + " " * 21,
        "ord_" + "+" + "0" * 20,
        "ord_" + "0_" * 10 + "1",
        "ord_" + "\u0661" * 21,  # ARABIC-INDIC DIGIT ONE: int() reads it
        "ord_" + "0" * 10000,
        "ord_" + "é" * 21,
        "ørd_" + "0" * 21,
        "ord_0000000000000000000\n1",
    ],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    with pytest.raises(PublicIdError) as caught:
        ORD.decode(token)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, UidFieldsError)


@pytest.mark.parametrize("token", [None, 5, b"ord_000", ["ord_"], 3.5])
def test_tokens_that_are_no_strings_are_refused(token: object) -> None:
    with pytest.raises(PublicIdError):
        ORD.decode(token)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, 2**64, True, 1.0, "5", None, b"5"])
def test_values_outside_the_id_space_are_refused(value: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        ORD.encode(value)  # type: ignore[arg-type]


# -- no visible structure --------------------------------------------------------------
def _ranks(values: list[Any]) -> list[int]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0] * len(values)
    for rank, index in enumerate(order):
        ranks[index] = rank
    return ranks


def _spearman(a: list[Any], b: list[Any]) -> float:
    ra, rb = _ranks(a), _ranks(b)
    n = len(a)
    d2 = sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True))
    return 1 - 6 * d2 / (n * (n * n - 1))


def _common_prefix(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(list(range(2**40, 2**40 + 4096)), id="consecutive-ints"),
        pytest.param(
            SnowflakeGenerator(TWITTER, datacenter=0, worker=3, clock=ManualClock(MS)).next_ids(
                4096
            ),
            id="snowflakes-of-one-ms",
        ),
        pytest.param(
            LocalityUUIDGenerator(
                sequential=True, pid=77, mac="02:00:00:00:00:09", clock=ManualClock(MS)
            ).next_ids(4096),
            id="sequential-locality-uuids",
        ),
    ],
)
def test_tokens_of_consecutive_ids_share_no_visible_structure(values: list[Any]) -> None:
    tokens = [ORD.encode(v)[4:-1] for v in values]  # the body, without the version
    # The first character takes every value about equally (chi-square, 31 degrees of
    # freedom: 80 is far beyond the 0.9999 quantile of about 62).
    for position in (0, 1, len(tokens[0]) - 1):
        seen = Counter(t[position] for t in tokens)
        assert len(seen) == 32, position
        expected = len(tokens) / 32
        chi2 = sum((seen[c] - expected) ** 2 / expected for c in CROCKFORD)
        assert chi2 < 80, (position, chi2)
    # Neighbours share no more leading characters than random strings (1/31 on average).
    shared = [_common_prefix(a, b) for a, b in itertools.pairwise(tokens)]
    assert sum(shared) / len(shared) < 0.08
    # Sorting tokens tells nothing of the ids' order (|rho| of 4096 random pairs is
    # below 0.06 with probability 0.9999).
    assert abs(_spearman(values, tokens)) < 0.06
    # One bit more in the id changes about half the token's bits.
    bits = [int(ORD.encode(v)[4:-1].translate(_TO_BASE32), 32) for v in values[:512]]
    flips = [bin(a ^ b).count("1") for a, b in itertools.pairwise(bits)]
    width = 100 if isinstance(values[0], int) else 160
    assert abs(sum(flips) / len(flips) - width / 2) < width * 0.05


_TO_BASE32 = str.maketrans(CROCKFORD, string.digits + "abcdefghijklmnopqrstuv")


# -- keys and prefixes -----------------------------------------------------------------
@pytest.mark.parametrize(
    "keys",
    [
        {},
        {1: "short"},
        {1: b"fifteen bytes.."},
        {1: KEY_1, 2: "x" * 15},
        {-1: KEY_1},
        {32: KEY_1},
        {True: KEY_1},
        {"one": KEY_1},
        {1.0: KEY_1},
        {1: 1234567890123456789},
        {1: None},
        [KEY_1],
        "a secret of enough length",
    ],
)
def test_bad_keys_are_refused_with_a_clear_error(keys: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        PublicIds("ord", keys)
    assert "key" in str(caught.value) or "version" in str(caught.value)


def test_a_short_secret_names_the_rule() -> None:
    with pytest.raises(ConfigurationError, match="at least 16 bytes"):
        PublicIds("ord", {1: "short"})


@pytest.mark.parametrize(
    "prefix",
    ["", "Ord", "ord_", "_ord", "or d", "ord-x", "1ord", "o" * 33, "ørd", None, 5, "ord__x"],
)
def test_bad_prefixes_are_refused(prefix: Any) -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        PublicIds(prefix, {1: KEY_1})


def test_prefixes_may_have_inner_underscores() -> None:
    codec = PublicIds("sub_sched", {1: KEY_1})
    token = codec.encode(42)
    assert token.startswith("sub_sched_")
    assert codec.decode(token) == 42
    with pytest.raises(PublicIdError):
        PublicIds("sched", {1: KEY_1}).decode(token)


def test_the_secrets_never_show() -> None:
    text = repr(ORD_2) + str(ORD_2)
    assert KEY_1 not in text and KEY_2.hex() not in text and repr(KEY_2) not in text
    assert "ord" in text and "2" in text


def test_the_module_names_its_construction() -> None:
    assert public.ROUNDS >= 8
    assert public.INT_REDUNDANCY_BITS == 36 and public.UUID_REDUNDANCY_BITS == 32


# -- settings --------------------------------------------------------------------------
def test_uid_config_builds_public_ids_from_the_settings() -> None:
    config = UidConfig({"PUBLIC_IDS": {"KEYS": {1: KEY_1, 2: KEY_2}}})
    codec = config.public_ids("ord")
    assert codec is config.public_ids("ord")
    assert codec.decode(ORD.encode(9)) == 9
    assert codec.encode(9) == ORD_2.encode(9)
    assert config.public_ids("ord", kind="int").kind == "int"


def test_uid_config_without_keys_says_what_to_set() -> None:
    with pytest.raises(ConfigurationError, match=r"PUBLIC_IDS.*KEYS"):
        UidConfig({}).public_ids("ord")


@pytest.mark.parametrize(
    ("settings", "code", "path"),
    [
        ({"PUBLIC_IDS": {"KEYS": {1: "short"}}}, "E030", "PUBLIC_IDS.KEYS.1"),
        ({"PUBLIC_IDS": {"KEYS": {}}}, "E030", "PUBLIC_IDS.KEYS"),
        ({"PUBLIC_IDS": {"KEYS": {40: KEY_1}}}, "E030", "PUBLIC_IDS.KEYS.40"),
        ({"PUBLIC_IDS": {"KEYS": {1: 5}}}, "E014", "PUBLIC_IDS.KEYS.1"),
        ({"PUBLIC_IDS": {"KEYS": [KEY_1]}}, "E014", "PUBLIC_IDS.KEYS"),
        ({"PUBLIC_IDS": {"KEY": {1: KEY_1}}}, "E013", "PUBLIC_IDS.KEY"),
        ({"PUBLIC_IDS": "secret"}, "E014", "PUBLIC_IDS"),
    ],
)
def test_settings_validation_reports_bad_public_id_keys(
    settings: dict[str, Any], code: str, path: str
) -> None:
    problems = validate(settings)
    assert [(p.code, p.path) for p in problems] == [(code, path)]
    assert KEY_1 not in str(problems)
    with pytest.raises(ConfigurationError):
        UidConfig(settings)


def test_a_short_secret_is_not_echoed_in_the_problem() -> None:
    (problem,) = validate({"PUBLIC_IDS": {"KEYS": {1: "hunter2"}}})
    assert "hunter2" not in str(problem)
    assert "at least 16 bytes" in str(problem)
