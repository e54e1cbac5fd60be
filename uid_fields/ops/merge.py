"""Merge rules of a fan-out: the rows of every shard, in the order one database would give.

Each shard runs the query with its own ORDER BY and a LIMIT of ``offset + limit``; the
merge must then repeat that order exactly, or a row that one shard ranked first is cut by
the final slice. Three things make a database's order differ from Python's sort:

- NULLs. PostgreSQL (and Oracle) sort NULL above every value: last when ascending, first
  when descending. SQLite and MySQL/MariaDB sort it below every value. An explicit
  ``NULLS FIRST`` / ``NULLS LAST`` overrides both.
- Text. A collation orders strings its own way (MariaDB's default one is case- and
  accent-insensitive). Text keys are ranked by the database itself (``text_ranks``, one
  query per merge that the adapter runs; see ``uid_fields.sql.collation``); without a
  ranker a text key is refused rather than merged in a different order.
- Several keys and descending keys, which a stable sort handles key by key.

Both ORMs build ``SortKey`` values from their own ordering syntax and call ``merge_rows``;
neither sorts shard rows itself.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from ..errors import UnmergeableQueryError

__all__ = [
    "AGGREGATES",
    "NULLS_SORT_HIGH",
    "PROBE",
    "NullsOrder",
    "SortKey",
    "TextRanker",
    "backend_of",
    "code_point_ranks",
    "combine_aggregate",
    "merge_rows",
    "null_position",
    "nulls_sort_high",
    "rank_texts",
    "ranks_like_code_points",
    "reversed_nulls",
    "window",
]

NullsOrder = Literal["first", "last"]

#: Whether a backend sorts NULL above every value (by its vendor or dialect name).
NULLS_SORT_HIGH: dict[str, bool] = {
    "postgresql": True,
    "oracle": True,
    "sqlite": False,
    "mysql": False,
    "mariadb": False,
    "mssql": False,
}


@dataclass(frozen=True)
class SortKey:
    """One term of an ORDER BY: how to read it from a merged row, and its direction."""

    get: Callable[[Any], Any]
    descending: bool = False
    nulls: NullsOrder | None = None  # explicit NULLS FIRST/LAST; None: the backend's rule
    name: str = "a key"  # for error messages


#: ``(key, strings) -> {string: dense rank}`` under the key's collation, from the database.
TextRanker = Callable[[SortKey, list[str]], Mapping[str, int]]


def explicit_nulls(first: bool, last: bool) -> NullsOrder | None:
    """The NULLS position an ordering names (``nulls_first``/``nulls_last`` in either
    ORM), or None for the backend's own rule; naming both is a contradiction."""
    if first and last:
        raise UnmergeableQueryError("an ordering cannot put NULLs both first and last")
    return "first" if first else "last" if last else None


def reversed_nulls(nulls: NullsOrder | None) -> NullsOrder | None:
    """An explicit NULLS FIRST/LAST under a reversed ordering (``reverse()``, ``last()``):
    it swaps, as a database reverses it; the backend's own rule needs no change."""
    return {"first": "last", "last": "first"}.get(nulls) if nulls else None  # type: ignore[return-value]


def nulls_sort_high(vendor: str) -> bool:
    """The backend's NULL rule; ``UnmergeableQueryError`` for a backend not known here."""
    try:
        return NULLS_SORT_HIGH[vendor]
    except KeyError:
        raise UnmergeableQueryError(
            f"the NULL order of the {vendor!r} backend is not known, so a fan-out cannot "
            "merge its rows; order with explicit NULLS FIRST/LAST"
        ) from None


def null_position(key: SortKey, vendor: str) -> NullsOrder:
    """Where NULLs of ``key`` land in the output of one database of ``vendor``."""
    if key.nulls is not None:
        return key.nulls
    high = nulls_sort_high(vendor)
    return "last" if high != key.descending else "first"


def backend_of(vendors: str | Sequence[str]) -> str:
    """The one backend of a fan-out's shards; ``UnmergeableQueryError`` for a mix."""
    if isinstance(vendors, str):
        return vendors
    kinds = set(vendors)
    if len(kinds) != 1:
        raise UnmergeableQueryError(
            f"the shards run different databases ({sorted(kinds)}), which order NULLs and "
            "text differently; fan out over shards of one backend"
        )
    return kinds.pop()


def merge_rows(
    parts: Sequence[Sequence[Any]],
    keys: Sequence[SortKey],
    vendors: str | Sequence[str],
    *,
    text_ranks: TextRanker | None = None,
) -> list[Any]:
    """The rows of every shard in one list, sorted as one database of ``vendors`` sorts.

    Stable: rows equal on every key keep shard order, then each shard's own order.
    """
    rows = [row for part in parts for row in part]
    if not keys or len(rows) < 2:
        return rows
    vendor = backend_of(vendors)
    for key in reversed(keys):
        values = [key.get(row) for row in rows]
        texts = [v for v in values if isinstance(v, str)]
        ranks: Mapping[str, int] | None = None
        if texts:
            if text_ranks is None:
                raise UnmergeableQueryError(
                    f"ordering by the text {key.name} across shards needs the database's "
                    "collation, which this merge cannot ask; order by a non-text key or "
                    "query each shard with its alias"
                )
            ranks = text_ranks(key, texts)
        position = null_position(key, vendor)
        # After the sort (reversed when descending), NULLs must sit at ``position``.
        none_rank = 0 if (position == "first") != key.descending else 1
        value_rank = 1 - none_rank

        sort_keys = [
            (none_rank,)
            if value is None
            else (
                value_rank,
                ranks[value] if ranks is not None and isinstance(value, str) else value,
            )
            for value in values
        ]
        # ``sorted`` is stable with ``reverse`` too: equal rows keep their order.
        order = sorted(range(len(rows)), key=sort_keys.__getitem__, reverse=key.descending)
        rows = [rows[i] for i in order]
    return rows


def _ranked(value: Any, ranks: Mapping[str, int] | None) -> Any:
    return ranks[value] if ranks is not None and isinstance(value, str) else value


#: Strings that every linguistic collation orders unlike code points ("a" before "B",
#: "é" next to "e"), and binary ones (C, ``*_bin``, SQLite's BINARY) like them.
PROBE = ("B", "a", "A", "b", "e", "é", "f", "Z", "_", " ", "-", "1", "ab", "a b")

#: column -> whether its collation ranks text as Python compares it (code points)
_code_point_columns: dict[Hashable, bool] = {}


def code_point_ranks(texts: Iterable[str]) -> dict[str, int]:
    """Dense ranks of strings in Python's (code point) order."""
    return {text: i for i, text in enumerate(sorted(set(texts)))}


def ranks_like_code_points(ranks: Mapping[str, int], texts: Iterable[str]) -> bool:
    """Whether a database's ranks of ``texts`` order and tie them exactly as Python's
    code points do. Only the order counts: ``DENSE_RANK()`` counts from 1 (or any base),
    code-point ranks from 0."""
    distinct = sorted(set(texts))
    if set(ranks) != set(distinct):
        return False
    values = [ranks[text] for text in distinct]
    return all(a < b for a, b in pairwise(values))


def rank_texts(
    column: Hashable, texts: list[str], ask: Callable[[list[str]], Mapping[str, int]]
) -> Mapping[str, int]:
    """Dense ranks of ``texts`` in ``column``'s collation, asked of the database (``ask``)
    once per merge, except for a column already seen to rank like code points.

    The first time a column is merged, the probe strings go with the values in the same
    query; a collation that ranks them exactly as Python does is a binary one, and later
    merges of that column sort in Python with no query.
    """
    known = _code_point_columns.get(column)
    if known:
        return code_point_ranks(texts)
    if known is None:
        ranks = ask([*PROBE, *texts])
        _code_point_columns[column] = ranks_like_code_points(ranks, [*PROBE, *texts])
        return ranks
    return ask(texts)


#: The aggregates whose per-shard answers combine into the one answer.
AGGREGATES = ("count", "sum", "min", "max")


def combine_aggregate(kind: str, values: Sequence[Any]) -> Any:
    """One aggregate from each shard's: counts and sums add up, min and max of the
    non-NULL answers; NULL (None) where no shard had a value (a count is 0 then). AVG and
    DISTINCT aggregates do not combine and are refused."""
    present = [v for v in values if v is not None]
    if kind == "count":
        return sum(present)
    if kind == "sum":
        return sum(present) if present else None
    if kind == "min":
        return min(present, default=None)
    if kind == "max":
        return max(present, default=None)
    raise UnmergeableQueryError(
        f"{kind}() cannot be combined across shards: only count(), sum(), min() and max() "
        "are (AVG needs the sum and the count: select both and divide)"
    )


def window(rows: list[Any], offset: int = 0, limit: int | None = None) -> list[Any]:
    """The slice a LIMIT/OFFSET takes of the merged rows (each shard ran ``offset+limit``)."""
    return rows[offset : None if limit is None else offset + limit]
