"""The security page tells the truth and is reachable; the pitfalls page no longer
recommends locality UUIDs to hide time and volume.

The attacks the page describes are run in tests/core/test_what_ids_reveal.py; here the
page's numbers are checked against the code that makes the tokens.
"""

from __future__ import annotations

import random
import re
import textwrap
from pathlib import Path

from uid_fields.ids import public

DOCS = Path(__file__).resolve().parents[2] / "docs"


def section(page: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", page, re.M)
    assert match, f"no heading {heading!r}"
    level = len(match.group(1))
    rest = page[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def test_the_security_page_is_in_the_site() -> None:
    assert (DOCS / "security.md").exists()
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    toctrees = re.findall(r"```\{toctree\}(.*?)```", index, re.S)
    assert any(re.search(r"^security$", tree, re.M) for tree in toctrees)


def test_every_scheme_is_on_the_page_with_what_it_reveals() -> None:
    page = (DOCS / "security.md").read_text(encoding="utf-8")
    for scheme in (
        "Twitter",
        "Instagram",
        "Sonyflake",
        "Discord",
        "Locality UUID",
        "Decimal",
        "uniqid",
    ):
        assert re.search(rf"^#+ .*{scheme}", page, re.M), scheme
    for word in ("millisecond", "MAC", "pid", "198491317", "12,345", "shard", "IP"):
        assert word in page, word


def test_the_page_states_the_construction_and_its_numbers() -> None:
    page = (DOCS / "security.md").read_text(encoding="utf-8")
    assert f"{public.ROUNDS} rounds" in page
    assert f"2^-{public.INT_REDUNDANCY_BITS}" in page
    assert f"2^-{public.UUID_REDUNDANCY_BITS}" in page
    assert f"{public.MIN_SECRET_BYTES} bytes" in page
    for reference in ("Luby", "Rackoff", "Patarin", "Bellare", "Rogaway", "BLAKE2", "800-108"):
        assert reference in page, reference
    hides = section(page, "What the tokens hide, and what they do not")
    for word in ("time", "order", "volume", "shard", "same object", "existence"):
        assert word in hides, word


def test_pitfalls_no_longer_recommends_locality_uuids_to_hide_time_and_volume() -> None:
    text = section((DOCS / "pitfalls.md").read_text(encoding="utf-8"), "What ids reveal")
    assert "security.md" in text
    assert not re.search(r"or use\s+locality UUIDs in variable mode", text)
    assert "198491317" in text or "locality UUIDs" in text  # said what they reveal instead


def test_the_locality_counting_snippet_is_right_as_printed() -> None:
    """The page's snippet, run as printed, gives the true count for every pair, also
    for counters whose top bit Java's shift overwrote (before: right for 7 of 40)."""
    from uid_fields import LocalityUUIDGenerator
    from uid_fields.clock import ManualClock

    page = (DOCS / "security.md").read_text(encoding="utf-8")
    counting = section(page, "Locality UUIDs")
    block = re.search(r"```python\n(.*?)```", counting, re.S)
    assert block, "no snippet"
    namespace: dict[str, object] = {}
    exec(textwrap.dedent(block.group(1)), namespace)
    made_between = namespace["made_between"]
    rng = random.Random(37)
    pairs = 0
    for n in range(40):
        generator = LocalityUUIDGenerator(
            pid=20_000 + n,
            mac="02:00:00:00:00:2a",
            counter=rng.randrange(2**32),
            clock=ManualClock(1_767_225_600_000),
        )
        first = generator.next_id()
        between = rng.randrange(1, 3000)
        generator.next_ids(between - 1)
        assert made_between(first, generator.next_id()) == between  # type: ignore[operator]
        pairs += 1
    assert pairs == 40


def test_the_shard_bits_numbers_are_the_codes() -> None:
    """What an id's logical shard narrows its owner to, with mix64, as the page says."""
    from collections import Counter

    from uid_fields._internal.hashing import mix64

    counts = Counter(mix64(owner) % 8192 for owner in range(1_000_000))
    page = section((DOCS / "security.md").read_text(encoding="utf-8"), "Instagram sharded ids")
    low, high = min(counts.values()), max(counts.values())
    assert f"between {low} and {high}" in page
    assert f"({round(1_000_000 / 8192)} on average)" in page
