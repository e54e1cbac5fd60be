"""The core's rules of what a move may delete (``uid_fields.ops.move_recovery``), on rows
as the adapters hand them over (tuples, primary key first); the end-to-end tests are
``tests/*/test_move_early_deploy.py`` and ``tests/stress/test_logical_move_*.py``."""

from __future__ import annotations

from uid_fields import TWITTER
from uid_fields.ops.move_recovery import TargetWrites, never_copied, refusal, source_copies


def test_without_a_switch_only_an_identical_copy_is_a_copy() -> None:
    source = [(1, "a"), (2, "b"), (3, "c")]
    target = [(1, "a"), (2, "B"), (4, "d")]
    assert source_copies(source, target, switched=False) == ([1], [3], [2])
    # after a switch the target owns the range: its version is the row's
    assert source_copies(source, target, switched=True) == ([1, 2], [3], [])


def test_rows_made_after_the_last_pass_cannot_be_copies() -> None:
    at = TWITTER.epoch_ms + 10_000_000
    before, after = TWITTER.min_id(at - 1), TWITTER.min_id(at + 61_000)
    assert never_copied([before, after], TWITTER, at, 60_000) == [after]
    assert never_copied([after], TWITTER, at + 2_000, 60_000) == []  # within the margin
    assert never_copied([after], None, at, 0) == []  # ids without time: nothing is told
    assert never_copied([after], TWITTER, None, 0) == []  # no pass on record


def test_the_refusal_names_tables_counts_and_both_ways_on() -> None:
    assert refusal([TargetWrites("t", only_on_source=3)], source="a", target="b", doing="x") is None
    said = refusal(
        [TargetWrites("t", 2, 1, keys=[7, 8, 9]), TargetWrites("u")],
        source="a",
        target="b",
        doing="--abort",
    )
    assert said is not None
    assert said.startswith("--abort refused: b was written to under a new map (2 rows and 1 ")
    assert "t: 2 rows only on the target, 1 rows changed there (keys 7, 8, 9, ...)" in said
    assert "u:" not in said and "switch forward" in said and "--copy-back" in said
    portable = refusal([TargetWrites("t", 1)], source="a", target="b", doing="x", forward=False)
    assert portable is not None and "cannot switch forward" in portable
