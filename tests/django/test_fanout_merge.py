"""A fan-out merge answers exactly as one database holding every row: NULLs, ties,
descending and several keys, explicit nulls_first/nulls_last, mixed-case and accented text
(a case-insensitive MariaDB collation), values() rows and LIMIT/OFFSET.

Run on SQLite shards and again on PostgreSQL and MariaDB shards by ``make test``. The
reference is the same table on one shard of the same backend, holding every row: the
query with ``.using(alias)`` there is what one database answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections
from django.db.models import F, QuerySet

from tests.django.testapp.models import Ranked
from uid_fields.django.routing import database_for_instance
from uid_fields.errors import UnmergeableQueryError
from uid_fields.placement import allow_off_shard_writes

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

RANKS = [None, 0, 3, 1, None, 2, 1, 0, 5]
NAMES = ["a", "B", "A", "b", "é", "e", "Z", "ab", "a b", "_x", "E"]

CASES: dict[str, Callable[[QuerySet[Ranked]], QuerySet[Ranked]]] = {
    "rank, two": lambda qs: qs.order_by("rank", "pk")[:2],
    "rank descending, a page": lambda qs: qs.order_by("-rank", "pk")[3:9],
    "nulls first": lambda qs: qs.order_by(F("rank").asc(nulls_first=True), "pk")[:5],
    "nulls last, descending": lambda qs: qs.order_by(F("rank").desc(nulls_last=True), "pk")[:5],
    "name": lambda qs: qs.order_by("name", "pk")[:7],
    "name descending then rank": lambda qs: qs.order_by("-name", "rank", "pk")[2:10],
    "rank then name, all": lambda qs: qs.order_by("rank", "name", "pk"),
    "reversed": lambda qs: qs.order_by("rank", "pk").reverse()[:6],
    "values by name": lambda qs: qs.order_by("name", "-pk").values("pk", "name")[1:8],
    "values_list by rank": lambda qs: qs.order_by("-rank", "pk").values_list("pk", flat=True)[:9],
}


def _rows(count: int = 66) -> list[dict[str, Any]]:
    return [
        {"bucket": i % 11, "rank": RANKS[i % len(RANKS)], "name": NAMES[i % len(NAMES)]}
        for i in range(count)
    ]


def _plain(result: Any) -> list[Any]:
    return [row.pk if isinstance(row, Ranked) else row for row in result]


def _answers(queryset: Callable[[], QuerySet[Ranked]]) -> dict[str, list[Any]]:
    return {name: _plain(case(queryset())) for name, case in CASES.items()}


def test_every_merge_answers_as_one_database() -> None:
    made = Ranked.objects.bulk_create([Ranked(**row) for row in _rows()])
    assert len({r._state.db for r in made}) >= 3  # the rows really are spread
    merged = _answers(lambda: Ranked.objects.on_all_shards())
    # The same rows, same ids, all on one database of the same backend.
    Ranked.objects.on_all_shards().delete()
    alias = "shard_0"
    with allow_off_shard_writes():
        Ranked.objects.using(alias).bulk_create(
            [Ranked(pk=r.pk, bucket=r.bucket, rank=r.rank, name=r.name) for r in made]
        )
    expected = _answers(lambda: Ranked.objects.using(alias))
    for name in CASES:
        assert merged[name] == expected[name], f"{name} on {connections[alias].vendor}"


def test_the_issue_case_keeps_the_row_ranked_first() -> None:
    """Ranks [1, 2, 3] on one shard and [None, None, 0] on another, ``[:2]``."""
    buckets: dict[str, int] = {}
    for bucket in range(64):
        buckets.setdefault(database_for_instance(Ranked(bucket=bucket, name="x")), bucket)
        if len(buckets) >= 2:
            break
    first, second = list(buckets.values())[:2]
    for rank in (1, 2, 3):
        Ranked.objects.create(bucket=first, rank=rank, name="x")
    for rank in (None, None, 0):
        Ranked.objects.create(bucket=second, rank=rank, name="x")
    got = [r.rank for r in Ranked.objects.on_all_shards().order_by("rank")[:2]]
    nulls_high = connections["shard_0"].vendor == "postgresql"
    assert got == ([0, 1] if nulls_high else [None, None])


def test_an_ordering_the_merge_cannot_repeat_is_refused_before_any_query() -> None:
    Ranked.objects.create(bucket=1, rank=1, name="x")
    with pytest.raises(UnmergeableQueryError, match="across shards"):
        list(Ranked.objects.on_all_shards().order_by(F("rank") + 1))
