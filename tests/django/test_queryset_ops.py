"""bulk_update, none(), an explicit fan-out after using(), annotations, raw SQL."""

from __future__ import annotations

import pytest
from django.db.models import Count

from tests.django.testapp.models import Customer, Order, Purchase, Review
from uid_fields import CrossDatabaseRelationError, ShardRoutingError, WrongShardError

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_bulk_update_groups_the_rows_per_shard() -> None:
    orders = [Order.objects.create(note="a") for _ in range(12)]
    assert len({o._state.db for o in orders}) > 1
    for order in orders:
        order.note = "b"
    assert Order.objects.bulk_update(orders, ["note"]) == 12
    for order in orders:
        assert Order.objects.using(order._state.db).get(pk=order.pk).note == "b"
    assert Order.objects.on_all_shards().bulk_update(orders, ["note"]) == 12
    elsewhere = next(o for o in orders if o._state.db != "shard_0")
    with pytest.raises(WrongShardError):
        Order.objects.using("shard_0").bulk_update([elsewhere], ["note"])


def test_none_is_empty_without_naming_a_shard() -> None:
    Order.objects.create()
    assert list(Order.objects.none()) == []
    assert Order.objects.none().count() == 0
    assert not Order.objects.none().exists()


def test_on_all_shards_after_using_fans_out() -> None:
    orders = [Order.objects.create() for _ in range(12)]
    qs = Order.objects.using("shard_1").on_all_shards()
    assert len(qs.shard_aliases) == 4
    assert qs.count() == 12 == len(list(qs))
    assert {o.pk for o in qs} == {o.pk for o in orders}


def test_annotations_over_co_located_children_merge() -> None:
    customers = [Customer.objects.create(name=str(i)) for i in range(8)]
    for n, customer in enumerate(customers):
        for _ in range(n):
            Purchase.objects.create(customer=customer)
    counted = dict(
        Customer.objects.on_all_shards().annotate(n=Count("purchases")).values_list("name", "n")
    )
    assert counted == {str(n): n for n in range(8)}
    objects = Customer.objects.on_all_shards().annotate(n=Count("purchases")).order_by("-id")
    assert [c.n for c in objects] == list(range(7, -1, -1))  # type: ignore[attr-defined]


def test_annotations_over_rows_elsewhere_are_refused() -> None:
    order = Order.objects.create()
    Review.objects.create(order=order)
    # refused when annotate() is called, before the GROUP BY check: the reviews of an
    # order may be on any shard, so even one shard's count would be wrong
    with pytest.raises(CrossDatabaseRelationError, match=r"'reviews'.*testapp\.Review"):
        list(Order.objects.on_all_shards().annotate(n=Count("reviews")))
    with pytest.raises(CrossDatabaseRelationError, match="'reviews'"):
        list(Order.objects.using(order._state.db).annotate(n=Count("reviews")))


def test_raw_sql_names_its_shard() -> None:
    order = Order.objects.create(note="raw")
    with pytest.raises(ShardRoutingError, match=r"using\(alias\)\.raw"):
        Order.objects.on_all_shards().raw("SELECT * FROM testapp_order")
    rows = list(Order.objects.using(order._state.db).raw("SELECT * FROM testapp_order"))
    assert [r.pk for r in rows] == [order.pk]
