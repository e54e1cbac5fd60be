"""The explicit NULLS position of an ordering is read by one core rule for both ORMs."""

from __future__ import annotations

import pytest

from uid_fields.errors import UnmergeableQueryError
from uid_fields.ops.merge import explicit_nulls, reversed_nulls


def test_an_explicit_nulls_position_is_named_once_for_both_orms() -> None:
    assert explicit_nulls(True, False) == "first"
    assert explicit_nulls(False, True) == "last"
    assert explicit_nulls(False, False) is None
    assert reversed_nulls(explicit_nulls(True, False)) == "last"
    with pytest.raises(UnmergeableQueryError, match="both first and last"):
        explicit_nulls(True, True)


@pytest.mark.parametrize(("collation", "binary"), [("C", True), ("und-x-icu", False)])
def test_a_binary_collation_on_postgresql_is_seen_as_one_by_its_ranks(
    collation: str | None, binary: bool
) -> None:
    """PostgreSQL's DENSE_RANK() counts from 1, code-point ranks from 0: a collation that
    orders as code points must still be seen as one (before: never, so a text key under
    COLLATE "C" never streamed)."""
    from tests import services
    from uid_fields.ops.merge import SortKey, rank_texts
    from uid_fields.ops.streams import text_streams
    from uid_fields.sql.collation import text_rank_param, text_rank_sql

    connection = services.postgres_connection()

    def ask(values: list[str]) -> dict[str, int]:
        with connection.cursor() as cursor:
            cursor.execute(text_rank_sql("postgresql", collation), [text_rank_param(values)])
            return {value: rank for value, rank in cursor.fetchall()}

    key = SortKey(lambda row: row, name="title")
    assert text_streams(key, lambda _key, texts: ask(texts)) is binary
    column = ("test", "title", collation, binary)
    rank_texts(column, ["b", "a"], ask)
    asked: list[list[str]] = []
    rank_texts(column, ["b", "a"], lambda values: asked.append(values) or ask(values))
    assert (asked == []) is binary  # a binary column is merged with no second query
    connection.close()
