"""``on_all_shards().iterator()`` and ``aiterator()`` stream: a k-way merge of the
shards' cursors, holding a chunk per shard rather than every row, with the first row out
before the shards' rows are all read; in the order ``list()`` gives (which
``test_fanout_merge`` holds to one database's).

Rows held are counted as model instances alive (``post_init`` + weak references), rows
read as instances built: both are what a list of every row would show.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db.models import F, QuerySet
from django.db.models.signals import post_init

from tests.django.testapp.models import Ranked

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

RANKS = [None, 0, 3, 1, None, 2, 1, 0, 5]
NAMES = ["a", "B", "A", "b", "é", "e", "Z", "ab", "a b", "_x", "E"]
ROWS = 400
CHUNK = 10


@pytest.fixture
def ranked() -> list[Ranked]:
    made = Ranked.objects.bulk_create(
        [
            Ranked(bucket=i % 11, rank=RANKS[i % len(RANKS)], name=NAMES[i % len(NAMES)])
            for i in range(ROWS)
        ]
    )
    assert len({r._state.db for r in made}) >= 3  # the rows really are spread
    return made


class Built:
    """Ranked instances made (``post_init``) and still alive (weak references)."""

    def __init__(self) -> None:
        self.count = 0
        self.alive: weakref.WeakSet[Ranked] = weakref.WeakSet()

    def __call__(self, sender: Any, instance: Ranked, **kwargs: Any) -> None:
        self.count += 1
        self.alive.add(instance)


@pytest.fixture
def built() -> Iterator[Built]:
    seen = Built()
    post_init.connect(seen, sender=Ranked)
    yield seen
    post_init.disconnect(seen, sender=Ranked)


def test_iterator_holds_a_chunk_per_shard_not_every_row(ranked: list[Ranked], built: Built) -> None:
    queryset = Ranked.objects.on_all_shards().order_by("-rank", "pk")
    shards = len(queryset.shard_aliases)
    del ranked[:]
    gc.collect()
    most, count = 0, 0
    for obj in queryset.iterator(chunk_size=CHUNK):
        count += 1
        del obj
        most = max(most, len(built.alive))
    assert count == ROWS
    assert most <= shards * CHUNK, f"{most} rows held at once"


def test_the_first_row_comes_before_the_shards_are_read(ranked: list[Ranked], built: Built) -> None:
    stream = Ranked.objects.on_all_shards().order_by("pk").iterator(chunk_size=CHUNK)
    first = next(stream)
    shards = len(Ranked.objects.on_all_shards().shard_aliases)
    assert first.pk == min(r.pk for r in ranked)
    assert built.count <= shards * CHUNK, f"{built.count} of {ROWS} rows read for the first"
    rest = list(stream)
    assert len(rest) == ROWS - 1


CASES: dict[str, Callable[[QuerySet[Ranked]], QuerySet[Ranked]]] = {
    "id": lambda qs: qs,
    "rank descending, a page": lambda qs: qs.order_by("-rank", "pk")[3:90],
    "nulls first": lambda qs: qs.order_by(F("rank").asc(nulls_first=True), "-pk"),
    "nulls last, descending": lambda qs: qs.order_by(F("rank").desc(nulls_last=True), "pk")[:50],
    "name": lambda qs: qs.order_by("name", "pk"),
    "reversed": lambda qs: qs.order_by("rank", "pk").reverse()[:60],
    "values by rank": lambda qs: qs.order_by("rank", "-pk").values("pk", "name"),
    "values_list flat": lambda qs: qs.order_by("-rank", "pk").values_list("pk", flat=True)[:99],
}


def _plain(rows: Any) -> list[Any]:
    return [row.pk if isinstance(row, Ranked) else row for row in rows]


@pytest.mark.parametrize("case", CASES)
def test_iterator_gives_the_rows_of_list(ranked: list[Ranked], case: str) -> None:
    queryset = CASES[case](Ranked.objects.on_all_shards())
    assert _plain(queryset.iterator(chunk_size=CHUNK)) == _plain(list(queryset))


def test_aiterator_streams_every_shard(ranked: list[Ranked], built: Built) -> None:
    queryset = Ranked.objects.on_all_shards().order_by("-rank", "pk")
    expected = _plain(list(queryset))
    built.count = 0

    async def first_then_rest() -> tuple[int, list[Any]]:
        rows = []
        read_for_first = -1
        async for obj in queryset.aiterator(chunk_size=CHUNK):
            if read_for_first < 0:
                read_for_first = built.count
            rows.append(obj.pk)
        return read_for_first, rows

    read_for_first, rows = async_to_sync(first_then_rest)()
    assert rows == expected
    assert read_for_first <= len(queryset.shard_aliases) * CHUNK
