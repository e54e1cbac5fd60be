"""id__time lookups compile to integer bounds on the id column."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import connections

from .helpers import capture_all
from .testapp.models import Order

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def _orders_around_a_boundary() -> tuple[list[Order], datetime, list[Order]]:
    before = [Order.objects.create(note="before") for _ in range(12)]
    time.sleep(0.02)
    cut = datetime.now(UTC)
    time.sleep(0.02)
    after = [Order.objects.create(note="after") for _ in range(12)]
    return before, cut, after


def test_gte_returns_exactly_the_rows_since_t_in_id_order() -> None:
    before, cut, after = _orders_around_a_boundary()
    found = list(Order.objects.on_all_shards().filter(id__time__gte=cut))
    assert [o.pk for o in found] == [o.pk for o in after]
    older = list(Order.objects.on_all_shards().filter(id__time__lt=cut))
    assert [o.pk for o in older] == [o.pk for o in before]


def test_range_lte_gt_and_exact() -> None:
    before, cut, after = _orders_around_a_boundary()
    first = after[0].id_parts.datetime
    qs = Order.objects.on_all_shards()
    assert qs.filter(id__time__range=(cut, datetime.now(UTC))).count() == len(after)
    assert qs.filter(id__time__lte=cut).count() == len(before)
    assert qs.filter(id__time__gt=cut).count() == len(after)
    exact = list(qs.filter(id__time=first))
    assert after[0] in exact and all(o.id_parts.datetime == first for o in exact)


def test_sql_is_a_plain_integer_comparison_on_the_id() -> None:
    cut = datetime(2025, 6, 1, tzinfo=UTC)
    with capture_all() as log:
        list(Order.objects.using("shard_0").filter(id__time__gte=cut))
    (sql,) = log.sql("shard_0")
    layout = Order._meta.pk.layout  # type: ignore[union-attr]
    assert f'"testapp_order"."id" >= {layout.min_id(cut)}' in sql.replace("`", '"')


def test_outside_the_lifetime_and_naive_datetimes() -> None:
    Order.objects.create()
    qs = Order.objects.on_all_shards()
    assert qs.filter(id__time__gte=datetime(2200, 1, 1, tzinfo=UTC)).count() == 0
    assert qs.filter(id__time__gte=datetime(2000, 1, 1, tzinfo=UTC)).count() == 1
    assert qs.filter(id__time__lt=datetime(2000, 1, 1, tzinfo=UTC)).count() == 0
    assert qs.filter(id__time__lt=datetime(2200, 1, 1, tzinfo=UTC)).count() == 1
    assert qs.filter(id__time__lte=datetime(2200, 1, 1, tzinfo=UTC)).count() == 1
    assert (
        qs.filter(
            id__time__range=(datetime(2000, 1, 1, tzinfo=UTC), datetime(2200, 1, 1, tzinfo=UTC))
        ).count()
        == 1
    )
    naive_future = datetime.now() + timedelta(days=1)  # read in TIME_ZONE (UTC here)
    assert qs.filter(id__time__lt=naive_future).count() == 1


@pytest.mark.skipif(settings.BACKEND != "postgres", reason="EXPLAIN output checked on PostgreSQL")
def test_postgres_uses_the_primary_key_index() -> None:
    Order.objects.bulk_create([Order(note=str(i)) for i in range(2000)])  # ~500 per shard
    with connections["shard_0"].cursor() as cursor:
        cursor.execute("ANALYZE testapp_order")
        qs = Order.objects.using("shard_0").filter(
            id__time__gte=datetime.now(UTC) - timedelta(minutes=1)
        )
        sql, params = qs.query.sql_with_params()
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "testapp_order_pkey" in plan and "Index Cond: (id >= " in plan, plan


@pytest.mark.parametrize("value", ["2024-13-45", "2024-02-30T10:00:00Z", "yesterday"])
def test_an_impossible_date_string_is_a_validation_error(value: str) -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        list(Order.objects.on_all_shards().filter(id__time__gte=value))
