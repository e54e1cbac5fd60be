"""A fan-out is answered exactly or refused (issue 34): GROUP BY, DISTINCT, AVG, HAVING,
``dates()`` and aggregates of distinct values merge across shards as one database
answers; subqueries whose rows span shards, windows, joins of rows that are not
co-located, set operations, ``DISTINCT ON``, ``select_for_update()`` and aggregates that do
not combine raise ``UnmergeableQueryError`` before any query runs.

The reference answers are computed here in Python from the rows created (the
differential test, ``test_fanout_differential``, compares with one database instead).
"""

from __future__ import annotations

import datetime
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.db.models import (
    Avg,
    Count,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    StdDev,
    Subquery,
    Sum,
    Variance,
    Window,
)
from django.db.models.functions import RowNumber

from tests.django.helpers import capture_all
from tests.django.testapp.models import (
    Customer,
    Order,
    Purchase,
    Ranked,
    Review,
    Stamp,
    Ticket,
    Workspace,
)
from uid_fields.errors import CrossDatabaseRelationError, UnmergeableQueryError

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

BACKEND = settings.BACKEND
NAMES = ["ann", "bob", "cy"]


def _ranked() -> list[Ranked]:
    """Rows of each name on several shards (bucket is the shard key)."""
    rows = [
        Ranked(bucket=i, rank=(i * 7) % 5 if i % 4 else None, name=NAMES[i % 3]) for i in range(24)
    ]
    made = Ranked.objects.bulk_create(rows)
    for name in NAMES:
        assert len({r._state.db for r in made if r.name == name}) >= 2
    return made


def _avg(values: list[int]) -> Any:
    """AVG of an integer column as the backend answers it: MariaDB keeps 4 decimals
    (div_precision_increment), the others a double's worth."""
    if BACKEND == "mysql":
        exact = Decimal(sum(values)) / len(values)
        return float(exact.quantize(Decimal("0.0001"), ROUND_HALF_UP))
    return pytest.approx(sum(values) / len(values), rel=1e-12)


def test_values_annotate_groups_merge_across_shards() -> None:
    made = _ranked()
    fan = Ranked.objects.on_all_shards()
    got = list(
        fan.values("name")
        .annotate(n=Count("id"), s=Sum("rank"), lo=Min("rank"), hi=Max("rank"), a=Avg("rank"))
        .order_by("name")
    )
    expected = []
    for name in NAMES:
        ranks = [r.rank for r in made if r.name == name and r.rank is not None]
        expected.append(
            {
                "name": name,
                "n": sum(1 for r in made if r.name == name),
                "s": sum(ranks),
                "lo": min(ranks),
                "hi": max(ranks),
                "a": _avg(ranks),
            }
        )
    assert got == expected


def test_having_order_and_slice_over_groups() -> None:
    made = _ranked()
    counts = Counter(r.rank for r in made)
    fan = Ranked.objects.on_all_shards()
    grouped = fan.values("rank").annotate(n=Count("id"))
    wanted = sorted(
        ((rank, n) for rank, n in counts.items() if n > 3), key=lambda p: (-p[1], p[0] or -1)
    )
    got = list(grouped.filter(n__gt=3).order_by("-n", "rank").values_list("rank", "n"))
    assert got == wanted
    assert list(grouped.order_by("-n", "rank").values_list("rank", "n")[1:3]) == wanted[1:3]
    assert grouped.filter(n__gt=3).count() == len(wanted)
    assert grouped.count() == len(counts)


def test_aggregate_distinct_filtered_and_avg() -> None:
    made = _ranked()
    fan = Ranked.objects.on_all_shards()
    ranks = [r.rank for r in made if r.rank is not None]
    got = fan.aggregate(
        d=Count("rank", distinct=True),
        names=Count("name", distinct=True),
        a=Avg("rank"),
        bob=Count("pk", filter=Q(name="bob")),
        lo=Min("rank", filter=Q(name="cy")),
    )
    assert got == {
        "d": len(set(ranks)),
        "names": 3,
        "a": _avg(ranks),
        "bob": sum(1 for r in made if r.name == "bob"),
        "lo": min(r.rank for r in made if r.name == "cy" and r.rank is not None),
    }


def test_distinct_values_and_models() -> None:
    made = _ranked()
    fan = Ranked.objects.on_all_shards()
    assert sorted(fan.values_list("name", flat=True).distinct()) == NAMES
    assert list(fan.values("name").distinct().order_by("-name")) == [
        {"name": n} for n in reversed(NAMES)
    ]
    assert fan.values("name").distinct().count() == 3
    assert fan.distinct().count() == len(made)
    assert sorted(r.pk for r in fan.distinct()) == sorted(r.pk for r in made)


def test_dates_and_datetimes_merge() -> None:
    # Workspaces made in one millisecond may share a shard: made until two shards hold
    # some (8 at once once fell on a single shard in a loaded CI run), 8 of them used.
    spaces = [Workspace.objects.create(slug=f"w{i}") for i in range(8)]
    while len({w._state.db for w in spaces[-8:]}) < 2 and len(spaces) < 200:
        spaces.append(Workspace.objects.create(slug=f"w{len(spaces)}"))
    spaces = spaces[-8:]
    assert len({w._state.db for w in spaces}) >= 2
    days = [datetime.date(2024, 1 + i % 3, 1 + i) for i in range(8)]
    for i, (space, day) in enumerate(zip(spaces, days, strict=True)):
        Ticket.objects.create(workspace=space, number=i, due=day)
    fan = Ticket.objects.on_all_shards()
    months = sorted({d.replace(day=1) for d in days})
    assert list(fan.dates("due", "month")) == months
    assert list(fan.dates("due", "month", order="DESC")) == months[::-1]
    assert list(fan.dates("due", "year")) == [datetime.date(2024, 1, 1)]
    assert fan.aggregate(first=Min("due"), last=Max("due")) == {
        "first": min(days),
        "last": max(days),
    }
    stamps = [Stamp.objects.create() for _ in range(6)]
    assert len({s._state.db for s in stamps}) >= 2
    hours = [
        datetime.datetime(2024, 5, 1 + i % 2, 10 + i % 3, 30, tzinfo=datetime.UTC) for i in range(6)
    ]
    for stamp, hour in zip(stamps, hours, strict=True):
        Stamp.objects.filter(pk=stamp.pk).update(created=hour)
    by_hour = sorted({h.replace(minute=0) for h in hours})
    assert list(Stamp.objects.on_all_shards().datetimes("created", "hour")) == by_hour
    by_day = sorted({h.replace(hour=0, minute=0) for h in hours}, reverse=True)
    assert list(Stamp.objects.on_all_shards().datetimes("created", "day", order="DESC")) == by_day


def test_count_of_children_over_co_located_relations_still_works() -> None:
    customers = [Customer.objects.create(name=f"c{i}") for i in range(6)]
    for i, customer in enumerate(customers):
        for _ in range(i):
            Purchase.objects.create(customer=customer, total=i)
    got = {c.name: c.n for c in Customer.objects.on_all_shards().annotate(n=Count("purchases"))}
    assert got == {f"c{i}": i for i in range(6)}


def test_exists_of_the_same_row_keeps_working() -> None:
    made = _ranked()
    fan = Ranked.objects.on_all_shards()
    same = Ranked.objects.filter(pk=OuterRef("pk"), name="bob")
    got = sorted(r.pk for r in fan.filter(Exists(same)))
    assert got == sorted(r.pk for r in made if r.name == "bob")


def _refused(run: Any, match: str) -> None:
    with capture_all() as log, pytest.raises(UnmergeableQueryError, match=match):
        run()
    assert log.count(verb="SELECT") == 0, "refused before any query"


def test_subqueries_across_shards_are_refused() -> None:
    _ranked()
    fan = Ranked.objects.on_all_shards()
    first = Ranked.objects.on_all_shards().order_by("id").values("id")[:3]
    _refused(lambda: list(fan.filter(id__in=Subquery(first))), "subquery")
    _refused(lambda: list(fan.filter(id__in=first)), "subquery")
    other = Ranked.objects.filter(rank=OuterRef("rank")).exclude(pk=OuterRef("pk"))
    _refused(lambda: list(fan.filter(Exists(other))), "subquery")
    _refused(lambda: fan.filter(Exists(other)).count(), "subquery")
    _refused(lambda: list(fan.filter(Exists(other)).iterator()), "subquery")
    _refused(lambda: fan.filter(Exists(other)).exists(), "subquery")


def test_windows_set_operations_and_more_are_refused() -> None:
    _ranked()
    fan = Ranked.objects.on_all_shards()
    numbered = fan.annotate(rn=Window(RowNumber(), order_by=F("rank").asc()))
    _refused(lambda: list(numbered), "window")
    _refused(lambda: list(fan.filter(rank=1).union(fan.filter(rank=2))), "set operation")
    _refused(lambda: list(fan.filter(rank=1).difference(fan.filter(rank=2))), "set operation")
    if connections["shard_0"].features.can_distinct_on_fields:
        _refused(lambda: list(fan.order_by("name").distinct("name")), "DISTINCT ON")
    if connections["shard_0"].features.has_select_for_update:
        _refused(lambda: list(fan.select_for_update()), "select_for_update")
    _refused(lambda: fan.aggregate(v=Variance("rank")), "variance")
    _refused(lambda: fan.aggregate(v=StdDev("rank")), "stddev")
    _refused(lambda: list(fan.values("name").annotate(v=Variance("rank"))), "variance")


def test_joins_of_rows_not_co_located_are_refused() -> None:
    order = Order.objects.create(note="x")
    Review.objects.create(order=order, stars=3)
    fan = Order.objects.on_all_shards()
    # refused when annotate() is called (relation_filters), or else by the planner
    with pytest.raises((UnmergeableQueryError, CrossDatabaseRelationError)):
        list(fan.annotate(n=Count("reviews")))


def test_avg_of_an_integer_column_is_a_float_as_the_database_s() -> None:
    made = _ranked()
    got = Ranked.objects.on_all_shards().aggregate(a=Avg("rank"))["a"]
    ranks = [r.rank for r in made if r.rank is not None]
    assert isinstance(got, float)
    assert got == _avg(ranks)


def test_aggregate_of_a_distinct_query_counts_each_row_once() -> None:
    """The admin's facets over a search through a multi-valued relation: the changelist's
    queryset is ``.distinct()``, and its aggregate must count each row once."""
    customers = [Customer.objects.create(name=f"c{i}") for i in range(6)]
    assert len({c._state.db for c in customers}) >= 2
    for i, customer in enumerate(customers):
        for _ in range(i + 1):
            Purchase.objects.create(customer=customer, total=5)
    found = Customer.objects.on_all_shards().filter(purchases__total__gt=0).distinct()
    assert found.count() == 6
    assert found.aggregate(n=Count("pk"), named=Count("pk", filter=Q(name="c3"))) == {
        "n": 6,
        "named": 1,
    }


def test_distinct_values_keep_django_s_meaning_under_meta_ordering() -> None:
    """``Meta.ordering`` (Order's: the id) is selected by a DISTINCT query, as Django
    does, so the notes repeat: the merge keeps that meaning, in id order."""
    orders = [Order.objects.create(note=f"n{i % 2}") for i in range(6)]
    by_id = sorted(orders, key=lambda o: o.pk)
    fan = Order.objects.on_all_shards()
    assert list(fan.values_list("note", flat=True).distinct()) == [o.note for o in by_id]
    assert sorted(fan.values_list("note", flat=True).distinct().order_by()) == ["n0", "n1"]


def test_an_aggregate_filtered_through_a_co_located_relation() -> None:
    customers = [Customer.objects.create(name=f"c{i}") for i in range(6)]
    for i, customer in enumerate(customers):
        Purchase.objects.create(customer=customer, total=i)
    fan = Customer.objects.on_all_shards()
    got = fan.aggregate(
        big=Count("pk", filter=Q(purchases__total__gte=3)),
        a=Avg("purchases__total", filter=Q(purchases__total__gte=1)),
    )
    assert got == {"big": 3, "a": _avg([1, 2, 3, 4, 5])}


def test_subqueries_through_the_shard_key_are_proven_on_the_shard() -> None:
    customers = [Customer.objects.create(name=f"c{i}") for i in range(8)]
    assert len({c._state.db for c in customers}) >= 2
    for i, customer in enumerate(customers):
        for _ in range(i % 3):
            Purchase.objects.create(customer=customer, total=i)
    buyers = Customer.objects.on_all_shards().filter(
        Exists(Purchase.objects.filter(customer=OuterRef("pk")))
    )
    assert sorted(c.name for c in buyers) == sorted(f"c{i}" for i in range(8) if i % 3)
    chosen = Customer.objects.filter(name__in=["c1", "c2", "c4"])
    bought = Purchase.objects.on_all_shards().filter(customer__in=chosen)
    assert bought.count() == 1 + 2 + 1


def test_text_groups_and_distinct_values_compare_in_the_collation() -> None:
    """MariaDB's default collation is case-insensitive: ``ann`` and ``ANN`` on two shards
    are one group there, as on one database; PostgreSQL and SQLite tell them apart."""
    spellings = ["ann", "ANN", "Ann", "bob"]
    made = Ranked.objects.bulk_create(
        [Ranked(bucket=i, rank=i, name=spellings[i % 4]) for i in range(16)]
    )
    assert len({r._state.db for r in made if r.name.lower() == "ann"}) >= 2
    fan = Ranked.objects.on_all_shards()
    groups = {row["name"].lower(): row["n"] for row in fan.values("name").annotate(n=Count("id"))}
    counts = sorted(fan.values("name").annotate(n=Count("id")).values_list("n", flat=True))
    distinct = fan.values_list("name", flat=True).distinct().order_by().count()
    counted = fan.aggregate(n=Count("name", distinct=True))["n"]
    if BACKEND == "mysql":
        assert groups == {"ann": 12, "bob": 4}
        assert distinct == counted == 2
    else:
        assert counts == [4, 4, 4, 4]
        assert distinct == counted == 4


@pytest.mark.skipif(BACKEND != "postgres", reason="PostgreSQL's aggregates")
def test_postgres_bool_aggregates_combine_and_string_agg_is_refused() -> None:
    from django.contrib.postgres.aggregates import ArrayAgg, BoolAnd, BoolOr, StringAgg

    spaces = [Workspace.objects.create(slug=f"s{i}") for i in range(6)]
    for i, space in enumerate(spaces):
        Ticket.objects.create(workspace=space, number=i, open=i != 3, title=f"t{i}")
    fan = Ticket.objects.on_all_shards()
    assert fan.aggregate(every=BoolAnd("open"), some=BoolOr("open")) == {
        "every": False,
        "some": True,
    }
    assert fan.filter(open=True).aggregate(every=BoolAnd("open")) == {"every": True}
    _refused(lambda: fan.aggregate(t=StringAgg("title", delimiter=",")), "stringagg")
    _refused(lambda: fan.aggregate(t=ArrayAgg("title")), "arrayagg")


def test_writes_through_a_subquery_across_shards_are_refused() -> None:
    """A fan-out update or delete runs per shard too: ``id__in=<the first 3 ids>`` would
    pick 3 rows on every shard (deleting up to 12 rows for 3)."""
    made = _ranked()
    fan = Ranked.objects.on_all_shards()
    first = Ranked.objects.on_all_shards().order_by("id").values("id")[:3]
    with pytest.raises(UnmergeableQueryError, match="subquery"):
        fan.filter(id__in=Subquery(first)).delete()
    with pytest.raises(UnmergeableQueryError, match="subquery"):
        fan.filter(id__in=Subquery(first)).update(name="x")
    assert fan.count() == len(made)
    assert not fan.filter(name="x").exists()
    mine = Ranked.objects.filter(pk=OuterRef("pk"), rank=1)
    assert fan.filter(Exists(mine)).update(name="one") == sum(1 for r in made if r.rank == 1)
