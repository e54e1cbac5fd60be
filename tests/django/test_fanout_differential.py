"""Differential test of fan-outs (issue 34, item 7): every statement is run over the
shards and on one database of the same backend holding every row, with the same ids, and
each must be SAME (equal answers; as multisets where there is no ORDER BY) or REFUSED
(``UnmergeableQueryError``), never different. The statements the planner answers (GROUP
BY, HAVING, DISTINCT, count(DISTINCT), AVG, filtered aggregates, ordering and slicing of
groups) must be SAME; a Hypothesis strategy composes more of them.

The one database is the spare server ``shard_4`` (migrated as the shards, in no fan-out:
``settings.SPARE``), written with the off-shard write guard lifted for the copy. Rows of
every name sit on several shards (the shard key ``bucket`` spreads them), so a group that
merges really comes from several databases. Averaged columns are integers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.db.models import (
    Avg,
    Count,
    DecimalField,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    Variance,
    Window,
)
from django.db.models.functions import Cast, RowNumber
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.django.testapp.models import Ranked
from uid_fields.errors import UnmergeableQueryError
from uid_fields.placement import allow_off_shard_writes

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

WHOLE = settings.SPARE  # one database holding every row
NAMES = ["ann", "bob", "cy", "dee"]

#: A statement: the queryset (or answer) made of a base queryset, and whether its answer
#: is ordered (compared as a list) or not (compared as a multiset).
Build = Callable[[QuerySet[Ranked]], Any]

AGGREGATES = {
    "n": lambda: Count("id"),
    "s": lambda: Sum("rank"),
    "lo": lambda: Min("rank"),
    "hi": lambda: Max("rank"),
    "a": lambda: Avg("rank"),
    "d": lambda: Count("rank", distinct=True),
    "dn": lambda: Count("name", distinct=True),
    "sd": lambda: Sum("rank", distinct=True),
    "ad": lambda: Avg("rank", distinct=True),
    "fb": lambda: Count("pk", filter=Q(name="bob")),
    "fa": lambda: Avg("rank", filter=Q(bucket__gt=5)),
    "fd": lambda: Count("rank", distinct=True, filter=Q(name__in=["ann", "cy"])),
}


def _decimal() -> Cast:
    """The integer rank as a NUMERIC(12, 2) plus 0.33: AVG's scale and rounding of a
    decimal column (PostgreSQL's NUMERIC division, MariaDB's 4 more digits)."""
    return Cast(F("rank") + Value(Decimal("0.33")), DecimalField(max_digits=12, decimal_places=2))


def _all(*names: str) -> dict[str, Any]:
    return {name: AGGREGATES[name]() for name in names}


#: (name, build, ordered, must be SAME)
STATEMENTS: list[tuple[str, Build, bool, bool]] = [
    (
        "groups",
        lambda qs: qs.values("name").annotate(**_all("n", "s", "lo", "hi", "a")),
        False,
        True,
    ),
    (
        "groups ordered",
        lambda qs: qs.values("name").annotate(**_all("n", "a")).order_by("name"),
        True,
        True,
    ),
    (
        "having, ordered by the aggregate",
        lambda qs: qs.values("rank").annotate(n=Count("id")).filter(n__gt=2).order_by("-n", "rank"),
        True,
        True,
    ),
    (
        "a slice of groups",
        lambda qs: qs.values("name").annotate(n=Count("id")).order_by("-n", "name")[1:3],
        True,
        True,
    ),
    (
        "having on an avg",
        lambda qs: qs.values("name").annotate(a=Avg("rank")).filter(a__gte=2),
        False,
        True,
    ),
    (
        "groups of two keys, distinct counts",
        lambda qs: qs.values("name", "rank").annotate(**_all("n", "d")),
        False,
        True,
    ),
    (
        "groups with a distinct count",
        lambda qs: qs.values("name").annotate(**_all("d", "sd", "ad", "fd")),
        False,
        True,
    ),
    (
        "groups by the shard key",
        lambda qs: qs.values("bucket").annotate(**_all("n", "a")),
        False,
        True,
    ),
    (
        "groups filtered",
        lambda qs: qs.filter(rank__gte=1).values("name").annotate(**_all("n", "s")),
        False,
        True,
    ),
    ("groups values_list", lambda qs: qs.values_list("name").annotate(n=Count("id")), False, True),
    (
        "groups by a key not selected",
        lambda qs: qs.values("name").annotate(n=Count("id"), a=Avg("rank")).values_list("n", "a"),
        False,
        True,
    ),
    ("aggregate", lambda qs: qs.aggregate(**_all("n", "s", "lo", "hi", "a")), False, True),
    (
        "avg of a decimal, whole and grouped",
        lambda qs: [
            qs.aggregate(a=Avg(_decimal()), s=Sum(_decimal())),
            sorted(qs.values_list("name").annotate(a=Avg(_decimal()))),
        ],
        True,
        True,
    ),
    ("aggregate distinct", lambda qs: qs.aggregate(**_all("d", "dn", "sd", "ad")), False, True),
    ("aggregate filtered", lambda qs: qs.aggregate(**_all("fb", "fa", "fd", "n")), False, True),
    ("count of groups", lambda qs: qs.values("name").annotate(n=Count("id")).count(), False, True),
    (
        "count of groups after having",
        lambda qs: qs.values("rank").annotate(n=Count("id")).filter(n__gt=2).count(),
        False,
        True,
    ),
    ("distinct rows", lambda qs: [r.pk for r in qs.distinct()], False, True),
    (
        "distinct values",
        lambda qs: qs.values_list("name", flat=True).distinct().order_by(),
        False,
        True,
    ),
    (
        "distinct values ordered",
        lambda qs: qs.values("name", "rank").distinct().order_by("name", "rank"),
        True,
        True,
    ),
    (
        "distinct values, a slice",
        lambda qs: qs.values_list("rank", flat=True).distinct().order_by("-rank")[1:4],
        True,
        True,
    ),
    ("distinct count", lambda qs: qs.values("name").distinct().order_by().count(), False, True),
    (
        "plain rows",
        lambda qs: list(qs.order_by("rank", "pk").values_list("pk", "name")[:7]),
        True,
        True,
    ),
    (
        "exists of the same row",
        lambda qs: [
            r.pk for r in qs.filter(Exists(Ranked.objects.filter(pk=OuterRef("pk"), rank=1)))
        ],
        False,
        True,
    ),
    # refused where they cannot be exact (SAME would do as well; different never)
    (
        "subquery of a slice",
        lambda qs: list(
            qs.filter(id__in=Subquery(qs.order_by("id").values("id")[:3])).values_list(
                "pk", flat=True
            )
        ),
        False,
        False,
    ),
    (
        "window",
        lambda qs: list(
            qs.annotate(rn=Window(RowNumber(), order_by=F("pk").asc())).values_list("pk", "rn")
        ),
        False,
        False,
    ),
    (
        "union",
        lambda qs: list(qs.filter(rank=1).union(qs.filter(rank=2)).values_list("pk", flat=True)),
        False,
        False,
    ),
    ("variance", lambda qs: qs.aggregate(v=Variance("rank")), False, False),
]


def _rows() -> list[Ranked]:
    made = Ranked.objects.bulk_create(
        [
            Ranked(bucket=i % 13, rank=(i * 5) % 7 if i % 6 else None, name=NAMES[i % len(NAMES)])
            for i in range(52)
        ]
    )
    for name in NAMES:
        assert len({r._state.db for r in made if r.name == name}) >= 2
    Ranked.objects.using(WHOLE).all().delete()
    with allow_off_shard_writes():
        Ranked.objects.using(WHOLE).bulk_create(
            [Ranked(pk=r.pk, bucket=r.bucket, rank=r.rank, name=r.name) for r in made]
        )
    return made


def _answer(result: Any) -> Any:
    if isinstance(result, QuerySet):
        result = list(result)
    if isinstance(result, list):
        return [_plain(row) for row in result]
    return result


def _plain(row: Any) -> Any:
    if isinstance(row, dict):
        return tuple(sorted(row.items()))
    if isinstance(row, Ranked):
        return row.pk
    return row


def _compare(name: str, build: Build, ordered: bool, must: bool) -> str:
    """SAME or REFUSED; an assertion error when the fan-out answers differently."""
    try:
        got = _answer(build(Ranked.objects.on_all_shards()))
    except UnmergeableQueryError:
        assert not must, f"{name}: refused, but it must be answered"
        return "REFUSED"
    expected = _answer(build(Ranked.objects.using(WHOLE)))
    if isinstance(got, list) and not ordered:
        got, expected = Counter(map(repr, got)), Counter(map(repr, expected))
    assert got == expected, f"{name} differs on {settings.BACKEND}"
    return "SAME"


def test_every_statement_is_same_or_refused() -> None:
    _rows()
    verdicts = {
        name: _compare(name, build, ordered, must) for name, build, ordered, must in STATEMENTS
    }
    assert verdicts["subquery of a slice"] == "REFUSED"
    assert verdicts["window"] == "REFUSED"
    assert verdicts["union"] == "REFUSED"
    assert verdicts["variance"] == "REFUSED"


# -- composed statements ------------------------------------------------------------------

KEYS = ["name", "rank", "bucket"]
_filters = st.sampled_from(
    [None, Q(rank__gte=2), Q(name__in=["ann", "dee"]), Q(bucket__lt=7), ~Q(rank=3)]
)


@st.composite
def statements(draw: st.DrawFn) -> tuple[str, Build, bool]:
    """A queryset of the constructs the planner answers: a filter, then groups (with
    aggregates, HAVING, an ordering that includes the keys and a slice), an aggregate()
    or DISTINCT values (ordered by every column, sliced)."""
    where = draw(_filters)
    shape = draw(st.sampled_from(["groups", "aggregate", "distinct"]))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True))
    chosen = draw(
        st.lists(st.sampled_from(sorted(AGGREGATES)), min_size=1, max_size=4, unique=True)
    )
    having = draw(st.sampled_from([None, 1, 2]))
    ordered = draw(st.booleans())
    window = draw(st.sampled_from([None, (0, 2), (1, 3), (2, None)]))
    descending = draw(st.booleans())

    def build(qs: QuerySet[Ranked]) -> Any:
        if where is not None:
            qs = qs.filter(where)
        if shape == "aggregate":
            return qs.aggregate(**_all(*chosen))
        if shape == "distinct":
            out = qs.values(*keys).distinct().order_by()
            if ordered:
                out = out.order_by(*[f"-{k}" if descending else k for k in keys])
                if window is not None:
                    out = out[window[0] : window[1]]
            return out
        names = [*chosen, "n"] if having is not None and "n" not in chosen else chosen
        grouped = qs.values(*keys).annotate(**_all(*names))
        if having is not None:
            grouped = grouped.filter(n__gt=having)
        if ordered:
            first = f"-{chosen[0]}" if descending else chosen[0]
            grouped = grouped.order_by(first, *keys)  # the keys make the order total
            if window is not None:
                grouped = grouped[window[0] : window[1]]
        return grouped

    label = (
        f"{shape} keys={keys} aggregates={chosen} where={where} having={having} "
        f"ordered={ordered} window={window}"
    )
    return label, build, ordered and shape != "aggregate"


def test_composed_statements_are_same() -> None:
    _rows()

    @hypothesis_settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(statements())
    def check(statement: tuple[str, Build, bool]) -> None:
        label, build, ordered = statement
        _compare(label, build, ordered, must=True)

    check()
