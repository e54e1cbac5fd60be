"""Generic foreign keys on ordinary models (``Bookmark``, on ``default``) pointing at rows
on shards: the content type comes from ``default``, the object from its own shard."""

from __future__ import annotations

import django
import pytest
from django.contrib.contenttypes.models import ContentType

from tests.django.helpers import capture_all
from tests.django.testapp.models import (
    Bookmark,
    Coupon,
    Customer,
    Order,
    PageView,
    Purchase,
    Remark,
)

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_assigning_a_sharded_row_sets_the_content_type_of_default() -> None:
    order = Order.objects.create(note="n")
    ContentType.objects.clear_cache()  # the content type is read, not remembered
    with capture_all() as log:
        bookmark = Bookmark(target=order, label="x")
    assert bookmark.content_type == ContentType.objects.db_manager("default").get_for_model(Order)
    assert bookmark.content_type._state.db == "default"
    assert bookmark.object_id == order.pk
    assert log.aliases() <= {"default"}
    bookmark.save()
    assert bookmark._state.db == "default"
    stored = Bookmark.objects.get(pk=bookmark.pk)
    assert (stored.content_type_id, stored.object_id) == (bookmark.content_type_id, str(order.pk))


@pytest.mark.parametrize("model", [Order, PageView, Purchase], ids=["snowflake", "uuid", "keyed"])
def test_reading_the_target_asks_its_shard(model: type) -> None:
    extra = {"customer": Customer.objects.create(name="c")} if model is Purchase else {}
    rows = [model.objects.create(**extra) for _ in range(4)]
    made = [Bookmark.objects.create(target=row, label=str(i)) for i, row in enumerate(rows)]
    ContentType.objects.clear_cache()
    for bookmark, row in zip(made, rows, strict=True):
        loaded = Bookmark.objects.get(pk=bookmark.pk)
        with capture_all() as log:
            target = loaded.target
        assert target == row and target._state.db == row._state.db
        assert log.aliases() <= {"default", row._state.db}
        assert log.count(row._state.db) == 1


def test_an_ordinary_target_is_read_as_django_reads_it() -> None:
    coupon = Coupon.objects.create(code="C")
    bookmark = Bookmark.objects.create(target=coupon)
    loaded = Bookmark.objects.get(pk=bookmark.pk)
    assert loaded.target == coupon and loaded.target._state.db == "default"


def test_a_missing_or_malformed_target_is_none() -> None:
    order = Order.objects.create()
    bookmark = Bookmark.objects.create(target=order)
    Order.objects.filter(pk=order.pk).delete()
    assert Bookmark.objects.get(pk=bookmark.pk).target is None
    broken = Bookmark.objects.create(
        content_type=ContentType.objects.get_for_model(Order), object_id="not-an-id"
    )
    assert Bookmark.objects.get(pk=broken.pk).target is None


def test_a_follower_target_is_found_on_its_parents_shard() -> None:
    purchase = Purchase.objects.create(customer=Customer.objects.create(name="c"))
    remark = Remark.objects.create(purchase=purchase, text="r")
    bookmark = Bookmark.objects.create(target=remark)
    found = Bookmark.objects.get(pk=bookmark.pk).target
    assert found == remark and found._state.db == purchase._state.db


def test_prefetching_targets_asks_each_shard_once() -> None:
    orders = [Order.objects.create(note=str(i)) for i in range(8)]
    views = [PageView.objects.create(path=f"/{i}") for i in range(3)]
    coupon = Coupon.objects.create(code="P")
    for row in [*orders, *views, coupon]:
        Bookmark.objects.create(target=row)
    with capture_all() as log:
        bookmarks = list(Bookmark.objects.prefetch_related("target").order_by("pk"))
    assert [b.target for b in bookmarks] == [*orders, *views, coupon]
    shards = {o._state.db for o in orders} | {v._state.db for v in views}
    assert log.aliases("SELECT") == {"default", *shards}
    assert all(log.count(alias, "SELECT") <= 2 for alias in shards)  # one per model


def test_filtering_by_the_target_runs_on_default() -> None:
    order = Order.objects.create()
    bookmark = Bookmark.objects.create(target=order, label="found")
    Bookmark.objects.create(target=Order.objects.create(), label="other")
    lookup = Bookmark.target.get_forward_related_filter(order)  # type: ignore[attr-defined]
    assert list(Bookmark.objects.filter(**lookup)) == [bookmark]


@pytest.mark.skipif(django.VERSION < (5, 0), reason="GenericPrefetch is new in Django 5.0")
def test_generic_prefetch_with_querysets_of_sharded_models() -> None:
    from django.contrib.contenttypes.prefetch import GenericPrefetch

    orders = [Order.objects.create(note=str(i)) for i in range(5)]
    view = PageView.objects.create(path="/p")
    for row in [*orders, view]:
        Bookmark.objects.create(target=row)
    querysets = [Order.objects.on_all_shards().only("pk"), PageView.objects.on_all_shards()]
    bookmarks = Bookmark.objects.prefetch_related(GenericPrefetch("target", querysets))
    assert [b.target for b in bookmarks.order_by("pk")] == [*orders, view]
