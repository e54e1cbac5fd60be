"""Decoded parts survive pickle, copy and deepcopy (a cache or a task queue does these)."""

from __future__ import annotations

import copy
import pickle

import pytest

from uid_fields import DECIMAL, DISCORD, INSTAGRAM, TWITTER, LocalityUUIDGenerator, locality


@pytest.mark.parametrize(
    "parts",
    [
        TWITTER.decompose(1_382_350_385_938_685_952),
        INSTAGRAM.decompose(INSTAGRAM.compose(timestamp_ms=INSTAGRAM.epoch_ms + 5, shard=7)),
        DISCORD.decompose(175_928_847_299_117_063),
        DECIMAL.decompose(DECIMAL.compose(timestamp_ms=DECIMAL.epoch_ms + 9, server=3)),
        locality.decompose(LocalityUUIDGenerator().next_id()),
    ],
    ids=["twitter", "instagram", "discord", "decimal", "locality"],
)
def test_parts_pickle_and_copy(parts: object) -> None:
    for clone in (
        pickle.loads(pickle.dumps(parts)),
        copy.copy(parts),
        copy.deepcopy(parts),
    ):
        assert clone == parts
        assert clone.datetime == parts.datetime  # type: ignore[attr-defined]
        assert repr(clone) == repr(parts)
