"""Streams behind a pooler: ``on_all_shards().iterator()`` over shards whose settings
disable server-side cursors (``DISABLE_SERVER_SIDE_CURSORS``, which Django's docs require
behind PgBouncer in transaction mode) is read in keyset chunks, each a query of its own:
bounded memory with no cursor to lose between two FETCHes, and the rows of ``list()``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from django.db.models import F, QuerySet
from django.test.utils import CaptureQueriesContext

from tests.django.testapp.models import Ranked
from tests.pgbouncer import running_pgbouncer

pytestmark = [
    pytest.mark.skipif(settings.BACKEND != "postgres", reason="PostgreSQL's server-side cursors"),
    pytest.mark.django_db(databases="__all__", transaction=True),
]

RANKS = [None, 0, 3, 1, None, 2, 1, 0, 5]
ROWS = 300
CHUNK = 7


@pytest.fixture
def ranked() -> list[Ranked]:
    made = Ranked.objects.bulk_create(
        [Ranked(bucket=i % 11, rank=RANKS[i % len(RANKS)], name=f"n{i % 13}") for i in range(ROWS)]
    )
    assert len({r._state.db for r in made}) >= 3  # the rows really are spread
    return made


@pytest.fixture
def no_server_cursors() -> Iterator[None]:
    """Every shard's settings say ``DISABLE_SERVER_SIDE_CURSORS`` (shared by every thread's
    connection of that alias), as a pooled deployment's would."""
    aliases = [*settings.SHARDS, settings.SPARE]
    for alias in aliases:
        connections[alias].settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
    yield
    for alias in aliases:
        connections[alias].settings_dict.pop("DISABLE_SERVER_SIDE_CURSORS", None)


# A slice of an order with ties may keep either of two tied rows (one database may too):
# each sliced case ends with the primary key, so both reads must keep the same rows.
CASES: dict[str, Callable[[QuerySet[Ranked]], QuerySet[Ranked]]] = {
    "id": lambda qs: qs,
    "rank descending, a page": lambda qs: qs.order_by("-rank", "pk")[3:90],
    "nulls first, then bucket": lambda qs: qs.order_by(F("rank").asc(nulls_first=True), "bucket"),
    "nulls last, descending": lambda qs: qs.order_by(F("rank").desc(nulls_last=True), "-bucket")[
        :50
    ],
    "rank only (ties on the primary key)": lambda qs: qs.order_by("rank"),
    "reversed": lambda qs: qs.order_by("rank", "pk").reverse()[:60],
    "values by rank": lambda qs: qs.order_by("rank", "-pk").values("pk", "rank"),
    "values_list flat": lambda qs: qs.order_by("-rank", "bucket", "-pk").values_list(
        "pk", flat=True
    )[:99],
}


def _keys(rows: Any, queryset: QuerySet[Ranked]) -> list[Any]:
    """Each row as what the order sees, and its identity: rows equal on the ordering may
    come in either order (as from one database), nothing else may differ."""
    return [row.pk if isinstance(row, Ranked) else row for row in rows]


@pytest.mark.parametrize("case", CASES)
def test_a_chunked_stream_gives_the_rows_of_list(
    ranked: list[Ranked], no_server_cursors: None, case: str
) -> None:
    queryset = CASES[case](Ranked.objects.on_all_shards())
    streamed = _keys(queryset.iterator(chunk_size=CHUNK), queryset)
    whole = _keys(list(queryset), queryset)
    assert sorted(map(str, streamed)) == sorted(map(str, whole))  # the same rows, once each
    assert len(set(map(str, streamed))) == len(streamed)
    by_pk = {r.pk: r for r in ranked}
    order = [t for t in ("rank", "bucket") if t in str(queryset.query).split("ORDER BY", 1)[-1]]
    if streamed and not isinstance(streamed[0], (dict, int)):
        assert [[getattr(by_pk[p], t) for t in order] for p in streamed] == [
            [getattr(by_pk[p], t) for t in order] for p in whole
        ]


def test_each_shard_is_read_a_chunk_per_query(
    ranked: list[Ranked], no_server_cursors: None
) -> None:
    """No server-side cursor and no whole result: a SELECT per chunk on each shard."""
    per_shard = {alias: sum(r._state.db == alias for r in ranked) for alias in settings.SHARDS}
    with ExitStack() as stack:
        seen = {
            a: stack.enter_context(CaptureQueriesContext(connections[a])) for a in settings.SHARDS
        }
        rows = list(
            Ranked.objects.on_all_shards().order_by("-rank", "pk").iterator(chunk_size=CHUNK)
        )
    assert len(rows) == ROWS
    for alias, count in per_shard.items():
        selects = [
            q
            for q in seen[alias].captured_queries
            if q["sql"].lstrip().upper().startswith("SELECT")
        ]
        assert len(selects) >= count // CHUNK, f"{alias}: {len(selects)} queries for {count} rows"
        assert all(f"LIMIT {CHUNK}" in q["sql"] for q in selects), selects[:2]


def _busy_clients(port: int, database: str, stop: threading.Event) -> None:
    """Another client's short transactions through the pooler, over and over: the server
    connection a stream used is lent to it between two of the stream's statements."""
    with psycopg.connect(
        host="127.0.0.1",
        port=port,
        dbname=database,
        user="postgres",
        autocommit=True,
        prepare_threshold=None,  # its own statements must not break through the pooler
    ) as conn:
        while not stop.is_set():
            with conn.transaction():
                conn.execute("SELECT pg_sleep(0.001)")


def test_a_stream_through_pgbouncer_reads_every_row(
    ranked: list[Ranked], no_server_cursors: None
) -> None:
    expected = sorted(r.pk for r in ranked)
    aliases = settings.SHARDS
    saved = {
        a: (connections[a].settings_dict["HOST"], connections[a].settings_dict["PORT"])
        for a in aliases
    }
    with running_pgbouncer(pool_size=3) as port:
        stop = threading.Event()
        workers = [
            threading.Thread(
                target=_busy_clients, args=(port, connections[a].settings_dict["NAME"], stop)
            )
            for a in aliases
            for _ in range(3)
        ]
        try:
            for alias in aliases:
                connections[alias].close()
                connections[alias].settings_dict.update(HOST="127.0.0.1", PORT=port)
            for worker in workers:
                worker.start()
            for _ in range(3):
                rows = [
                    obj.pk
                    for obj in Ranked.objects.on_all_shards()
                    .order_by("pk")
                    .iterator(chunk_size=CHUNK)
                ]
                assert rows == expected
        finally:
            stop.set()
            for worker in workers:
                worker.join(10)
            for alias in aliases:
                connections[alias].close()
                connections[alias].settings_dict.update(HOST=saved[alias][0], PORT=saved[alias][1])
