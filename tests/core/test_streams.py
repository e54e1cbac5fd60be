"""The streaming merge gives the order of the list merge (``merge_rows``, which the
differential tests hold to one database's order) while reading each shard lazily."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uid_fields.errors import UnmergeableQueryError
from uid_fields.ops.merge import SortKey, merge_rows
from uid_fields.ops.streams import merge_streams, text_streams

VENDORS = ["postgresql", "sqlite", "mysql"]
value = st.one_of(st.none(), st.integers(-3, 3))
row = st.tuples(value, value, st.integers())


def _keys(spec: list[tuple[bool, str | None]]) -> list[SortKey]:
    return [
        SortKey(lambda r, i=i: r[i], descending, nulls, f"k{i}")  # type: ignore[misc]
        for i, (descending, nulls) in enumerate(spec)
    ]


def _database_order(rows: list[Any], keys: list[SortKey], vendor: str) -> list[Any]:
    return merge_rows([rows], keys, vendor)


@given(
    shards=st.lists(st.lists(row, max_size=12), min_size=1, max_size=5),
    spec=st.lists(
        st.tuples(st.booleans(), st.sampled_from([None, "first", "last"])), min_size=1, max_size=2
    ),
    vendor=st.sampled_from(VENDORS),
)
def test_a_stream_merges_as_the_list_merge(
    shards: list[list[tuple[Any, ...]]], spec: list[tuple[bool, Any]], vendor: str
) -> None:
    keys = _keys(spec)
    # Each shard returns its rows in the query's order, as its database sorts them.
    parts = [_database_order(rows, keys, vendor) for rows in shards]
    assert list(merge_streams(parts, keys, vendor)) == merge_rows(parts, keys, vendor)


def test_one_row_per_shard_is_read_ahead() -> None:
    pulled = [0, 0, 0]

    def shard(index: int, count: int) -> Iterator[tuple[int]]:
        for i in range(count):
            pulled[index] += 1
            yield (i * 3 + index,)

    stream = merge_streams([shard(i, 1000) for i in range(3)], _keys([(False, None)]), "sqlite")
    assert next(stream) == (0,)
    assert pulled == [1, 1, 1]
    assert [next(stream) for _ in range(5)] == [(1,), (2,), (3,), (4,), (5,)]
    assert pulled == [3, 3, 2]  # a shard is read again only after its row went out


def test_dropping_a_stream_closes_every_shard() -> None:
    closed: list[int] = []

    def shard(index: int) -> Iterator[tuple[int]]:
        try:
            yield from ((i,) for i in range(10))
        finally:
            closed.append(index)

    stream = merge_streams([shard(0), shard(1)], _keys([(True, None)]), "postgresql")
    next(stream)
    stream.close()
    assert sorted(closed) == [0, 1]


def test_text_streams_only_under_a_code_point_collation() -> None:
    keys = _keys([(False, None)])
    with pytest.raises(UnmergeableQueryError, match="collation"):
        list(merge_streams([[("b",)], [("a",)]], keys, "mysql"))
    case_blind = lambda key, texts: {t: i for i, t in enumerate(sorted(set(texts), key=str.lower))}  # noqa: E731
    assert not text_streams(keys[0], case_blind)
    assert not text_streams(keys[0], None)
    binary = lambda key, texts: {t: i for i, t in enumerate(sorted(set(texts)))}  # noqa: E731
    assert text_streams(keys[0], binary)
    merged = merge_streams([[("B",), ("a",)], [("A",), ("b",)]], keys, "mysql", text_keys={"k0"})
    assert list(merged) == [("A",), ("B",), ("a",), ("b",)]


def test_shards_of_different_backends_are_refused() -> None:
    with pytest.raises(UnmergeableQueryError, match="different databases"):
        merge_streams([[], []], _keys([(False, None)]), ["sqlite", "postgresql"])
