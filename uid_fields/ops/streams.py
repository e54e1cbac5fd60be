"""Streaming merge of a fan-out: the shards' rows in the global order, one row per shard
held at a time.

``merge.merge_rows`` sorts every row of every shard in one list, which a page of rows
needs anyway. An iteration over a whole table does not: each shard already returns its
rows in the query's ORDER BY, so a k-way merge of the shards' cursors (``heapq``, one
row per shard in the heap) yields rows in the order one database would, with memory
bounded by shards x the cursors' chunk size and the first row out as soon as every
shard's first chunk is in.

The order of two rows is the one ``merge_rows`` gives: the same NULL rule per backend
(``merge.null_position``), explicit NULLS FIRST/LAST, descending keys, and ties kept in
shard order, then each shard's own order. Text is the one difference: ``merge_rows``
ranks a page's strings through the database, which a stream cannot do for rows it has
not seen yet. So a stream compares strings as Python does (code points), which is right
only for a column whose collation is a binary one; ``text_streams`` asks the database
once (the probe strings of ``merge.rank_texts``) and the adapters stream only when it
says so, else they merge the whole result as before. A string met under a key that was
not checked is refused rather than merged in a different order.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Generator, Iterable, Iterator, Sequence
from contextlib import suppress
from typing import Any

from ..errors import UnmergeableQueryError
from .merge import PROBE, SortKey, TextRanker, backend_of, null_position, ranks_like_code_points

__all__ = ["merge_streams", "text_streams"]


class _Descending:
    """One key's value under DESC: compares the other way round."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.value < self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and bool(self.value == other.value)

    __hash__ = None  # type: ignore[assignment]


def text_streams(key: SortKey, text_ranks: TextRanker | None) -> bool:
    """Whether the text ``key`` can be merged as a stream: its collation ranks strings
    as Python compares them (one query the first time a column is seen, none after)."""
    if text_ranks is None:
        return False
    return ranks_like_code_points(text_ranks(key, list(PROBE)), PROBE)


def merge_streams(
    parts: Sequence[Iterable[Any]],
    keys: Sequence[SortKey],
    vendors: str | Sequence[str],
    *,
    text_keys: Collection[str] = (),
) -> Generator[Any, None, None]:
    """The rows of ``parts`` (each already in the query's order, as its shard returned
    them) in the order one database of ``vendors`` gives, read lazily: at most one row
    per part is held here. ``text_keys`` names the keys whose strings compare as code
    points (``text_streams``); a string under any other key raises
    ``UnmergeableQueryError``. Parts that can be closed (generators over cursors) are
    closed when the stream ends or is dropped, which releases their cursors."""
    iterators = [iter(part) for part in parts]
    if not keys:
        return _chained(iterators)
    vendor = backend_of(vendors)
    # Per key: (rank of a NULL, rank of a value, descending, may hold text, name).
    rules = []
    for key in keys:
        position = null_position(key, vendor)
        none_rank = 0 if (position == "first") != key.descending else 1
        rules.append((key.get, none_rank, 1 - none_rank, key.descending, key.name in text_keys))
    names = [key.name for key in keys]

    def order(row: Any) -> tuple[Any, ...]:
        terms = []
        for (get, none_rank, value_rank, descending, text), name in zip(rules, names, strict=True):
            value = get(row)
            if isinstance(value, str) and not text:
                raise UnmergeableQueryError(
                    f"streaming the text {name} across shards needs the column's collation "
                    "to rank strings as code points; read the rows with list() or order by "
                    "a non-text key"
                )
            term = (none_rank,) if value is None else (value_rank, value)
            terms.append(_Descending(term) if descending else term)
        return tuple(terms)

    return _merged(iterators, order)


def _merged(iterators: list[Iterator[Any]], order: Any) -> Generator[Any, None, None]:
    try:
        heap: list[tuple[tuple[Any, ...], int, Any]] = []
        for index, rows in enumerate(iterators):
            for row in rows:
                heap.append((order(row), index, row))
                break
        heapq.heapify(heap)
        while heap:
            _, index, row = heap[0]
            yield row  # before its shard is read again: the first row waits for no more
            following = next(iterators[index], _END)
            if following is _END:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (order(following), index, following))
    finally:
        _close(iterators)


def _chained(iterators: list[Iterator[Any]]) -> Generator[Any, None, None]:
    try:
        for rows in iterators:
            yield from rows
    finally:
        _close(iterators)


_END = object()


def _close(iterators: list[Iterator[Any]]) -> None:
    for rows in iterators:
        close = getattr(rows, "close", None)
        if close is not None:
            with suppress(Exception):  # a cursor already gone: nothing left to release
                close()
