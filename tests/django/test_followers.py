"""Follower models: a uid id of their own that names no shard, and a foreign key to a
sharded parent whose database they live on (``Remark`` under ``Purchase``, ``OrderLine``
under ``Order``). A query that names the parent reads the parent's database; one that
does not says how to find the rows."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import models
from django.test import Client
from django.test.utils import isolate_apps
from django.urls import reverse

from tests.django.helpers import capture_all
from tests.django.testapp.models import (
    Customer,
    Order,
    OrderLine,
    Purchase,
    PurchaseLine,
    Remark,
)
from uid_fields.django import (
    ShardedManager,
    ShardRoutingError,
    SnowflakeField,
    allow_off_shard_writes,
)
from uid_fields.django.ops.audit import audit_model
from uid_fields.django.routing import unroutable

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def purchases_on_two_shards() -> tuple[Purchase, Purchase]:
    """Two purchases (of two customers) on two different databases."""
    first = Purchase.objects.create(customer=Customer.objects.create(name="a"))
    while True:
        other = Purchase.objects.create(customer=Customer.objects.create(name="b"))
        if other._state.db != first._state.db:
            return first, other


def test_a_filter_by_the_parent_reads_the_parents_database_only() -> None:
    one, two = purchases_on_two_shards()
    mine = [Remark.objects.create(purchase=one, text=f"r{i}") for i in range(3)]
    Remark.objects.create(purchase=two, text="other")
    for lookup in (
        {"purchase": one},
        {"purchase_id": one.pk},
        {"purchase__pk": one.pk},
        {"purchase__id": str(one.pk)},
        {"purchase__exact": one},
    ):
        with capture_all() as log:
            found = list(Remark.objects.filter(**lookup).order_by("text"))
        assert [r.pk for r in found] == [r.pk for r in mine], lookup
        assert log.aliases("SELECT") == {one._state.db}, lookup
        assert {r._state.db for r in found} == {one._state.db}


def test_a_filter_by_several_parents_reads_their_databases() -> None:
    one, two = purchases_on_two_shards()
    a = Remark.objects.create(purchase=one, text="a")
    b = Remark.objects.create(purchase=two, text="b")
    for lookup in (
        {"purchase__in": [one, two]},
        {"purchase_id__in": [one.pk, two.pk]},
        {"purchase__pk__in": [str(one.pk), two.pk]},
    ):
        with capture_all() as log:
            found = list(Remark.objects.filter(**lookup).order_by("pk"))
        assert {r.pk for r in found} == {a.pk, b.pk}, lookup
        assert log.aliases("SELECT") == {one._state.db, two._state.db}, lookup
    assert Remark.objects.filter(purchase__in=[one, two]).count() == 2
    assert list(Remark.objects.filter(purchase__in=[two])) == [b]


def test_counts_updates_and_deletes_by_the_parent_run_on_its_database() -> None:
    one, two = purchases_on_two_shards()
    for i in range(3):
        Remark.objects.create(purchase=one, text=f"r{i}")
    kept = Remark.objects.create(purchase=two, text="kept")
    assert Remark.objects.filter(purchase=one).count() == 3
    assert Remark.objects.filter(purchase=one).exists()
    assert Remark.objects.filter(purchase=one).update(text="seen") == 3
    with capture_all() as log:
        deleted, detail = Remark.objects.filter(purchase=one).delete()
    assert (deleted, detail) == (3, {"testapp.Remark": 3})
    assert log.aliases("DELETE") == {one._state.db}
    assert not Remark.objects.filter(purchase=one).exists()
    assert Remark.objects.using(two._state.db).get(pk=kept.pk).text == "kept"


def test_a_parent_of_hashed_snowflake_ids_routes_its_followers_too() -> None:
    orders = [Order.objects.create(note=str(i)) for i in range(8)]
    lines = {o.pk: OrderLine.objects.create(order=o, sku=f"s{o.pk}") for o in orders}
    for order in orders:
        with capture_all() as log:
            (line,) = OrderLine.objects.filter(order_id=order.pk)
        assert line == lines[order.pk] and log.aliases("SELECT") == {order._state.db}
    everything = OrderLine.objects.filter(order__in=orders)
    assert sorted(x.pk for x in everything) == sorted(x.pk for x in lines.values())
    assert OrderLine.objects.filter(order__in=orders).delete()[0] == 8


def test_a_malformed_or_unknown_parent_matches_nothing() -> None:
    one, _two = purchases_on_two_shards()
    Remark.objects.create(purchase=one, text="x")
    assert list(Remark.objects.filter(purchase_id="abc")) == []
    assert list(Remark.objects.filter(purchase__in=["abc"])) == []
    assert Remark.objects.filter(purchase_id=one.pk + 1).count() == 0
    with pytest.raises(Remark.DoesNotExist):  # its own malformed id: a 404, not a 500
        Remark.objects.filter(purchase=one).get(pk="abc")
    assert list(Remark.objects.filter(purchase=one, pk__in=["abc", "1x"])) == []


def test_prefetching_followers_of_parents_on_several_shards() -> None:
    one, two = purchases_on_two_shards()
    for purchase in (one, two):
        for i in range(2):
            Remark.objects.create(purchase=purchase, text=f"{purchase.pk}-{i}")
    with capture_all() as log:
        purchases = list(
            Purchase.objects.filter(pk__in=[one.pk, two.pk]).prefetch_related("remarks")
        )
    assert {p.pk: sorted(r.text for r in p.remarks.all()) for p in purchases} == {
        p.pk: [f"{p.pk}-0", f"{p.pk}-1"] for p in (one, two)
    }
    # Django filters a prefetch with a Q object; while Q objects do not narrow the
    # shards, every shard is read, and nothing else.
    assert {one._state.db, two._state.db} <= log.aliases("SELECT") <= set(settings.SHARDS)
    parents = Remark.objects.filter(purchase__in=[one, two]).select_related("purchase")
    assert {r.purchase for r in parents} == {one, two}


def test_a_lookup_by_its_own_id_alone_says_how_to_find_the_row() -> None:
    one, _two = purchases_on_two_shards()
    remark = Remark.objects.create(purchase=one, text="x")
    with pytest.raises(ShardRoutingError) as caught:
        Remark.objects.get(pk=remark.pk)
    message = str(caught.value)
    assert "Purchase" in message and "purchase=" in message and "on_all_shards()" in message
    assert "purchase.remarks.all()" in message
    with pytest.raises(ShardRoutingError):
        Remark.objects.filter(text="x").count()
    assert Remark.objects.on_all_shards().get(pk=remark.pk) == remark
    assert Remark.objects.get(pk=remark.pk, purchase=one) == remark
    assert one.remarks.get(pk=remark.pk) == remark  # type: ignore[attr-defined]


@isolate_apps("tests.django.testapp")
def test_the_message_of_a_follower_without_a_reverse_accessor() -> None:
    class HiddenLine(models.Model):
        id = SnowflakeField(primary_key=True)
        order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="+")
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    message = str(unroutable(HiddenLine))
    assert "order_id=" in message and "None" not in message


def test_a_parents_cascade_deletes_its_followers_on_its_database() -> None:
    one, two = purchases_on_two_shards()
    Remark.objects.create(purchase=one, text="gone")
    kept = Remark.objects.create(purchase=two, text="kept")
    Purchase.objects.get(pk=one.pk).delete()
    assert Remark.objects.filter(purchase_id=one.pk).count() == 0
    assert Remark.objects.filter(purchase=two).get() == kept


def test_get_or_create_and_update_or_create_by_the_parent() -> None:
    one, two = purchases_on_two_shards()
    made, created = Remark.objects.get_or_create(purchase=one, text="once")
    assert created and made._state.db == one._state.db
    again, created = Remark.objects.get_or_create(purchase=one, text="once")
    assert not created and again == made
    changed, created = Remark.objects.update_or_create(
        purchase=one, text="once", defaults={"text": "twice"}
    )
    assert not created and changed.pk == made.pk
    assert Remark.objects.get(purchase=one).text == "twice"
    new, created = Remark.objects.update_or_create(purchase=two, text="fresh")
    assert created and new._state.db == two._state.db
    assert Remark.objects.on_all_shards().count() == 2


# -- the admin: remarks inline under their purchase ------------------------------------------


@pytest.fixture
def client() -> Client:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    c = Client()
    c.force_login(user)
    return c


def _inline_form(purchase: Purchase, rows: list[dict[str, str]], extra: int = 1) -> dict[str, str]:
    """The POST of a purchase's change form with its remark and line inlines."""
    data = {"customer": str(purchase.customer_id), "total": str(purchase.total)}
    initial = sum(1 for row in rows if row.get("id"))
    data.update(
        {
            "remarks-TOTAL_FORMS": str(len(rows)),
            "remarks-INITIAL_FORMS": str(initial),
            "remarks-MIN_NUM_FORMS": "0",
            "remarks-MAX_NUM_FORMS": "1000",
            "lines-TOTAL_FORMS": "0",
            "lines-INITIAL_FORMS": "0",
            "lines-MIN_NUM_FORMS": "0",
            "lines-MAX_NUM_FORMS": "1000",
        }
    )
    for index, row in enumerate(rows):
        data.update({f"remarks-{index}-{key}": value for key, value in row.items()})
        data[f"remarks-{index}-purchase"] = str(purchase.pk)
    return data


def test_the_admin_change_view_edits_remarks_inline_on_the_parents_shard(client: Client) -> None:
    _first, purchase = purchases_on_two_shards()
    shard = purchase._state.db
    kept = Remark.objects.create(purchase=purchase, text="kept")
    doomed = Remark.objects.create(purchase=purchase, text="doomed")
    url = reverse("admin:testapp_purchase_change", args=[purchase.pk])
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "kept" in html and "doomed" in html
    rows = [
        {"id": str(kept.pk), "text": "edited"},
        {"id": str(doomed.pk), "text": "doomed", "DELETE": "on"},
        {"id": "", "text": "added"},
    ]
    response = client.post(url, _inline_form(purchase, rows))
    assert response.status_code == 302, response.content.decode()[:3000]
    on_shard = Remark.objects.filter(purchase=purchase)
    assert sorted(r.text for r in on_shard) == ["added", "edited"]
    assert {r._state.db for r in on_shard} == {shard}
    assert not Remark.objects.on_all_shards().filter(pk=doomed.pk).exists()
    for alias in settings.SHARDS:  # nothing landed anywhere else
        if alias != shard:
            assert not Remark.objects.using(alias).exists()


def test_the_admin_deletes_an_inline_row_of_a_co_located_child(client: Client) -> None:
    """PurchaseLine (shard_key="purchase") lives on its purchase's shard, as a follower."""
    _first, purchase = purchases_on_two_shards()
    line = PurchaseLine.objects.create(purchase=purchase, sku="old")
    url = reverse("admin:testapp_purchase_change", args=[purchase.pk])
    data = _inline_form(purchase, [])
    data.update(
        {
            "lines-TOTAL_FORMS": "1",
            "lines-INITIAL_FORMS": "1",
            "lines-0-id": str(line.pk),
            "lines-0-purchase": str(purchase.pk),
            "lines-0-sku": "old",
            "lines-0-DELETE": "on",
        }
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert not PurchaseLine.objects.filter(purchase=purchase).exists()


def test_the_admin_add_view_saves_a_purchase_with_remarks(client: Client) -> None:
    customer = Customer.objects.create(name="buyer")
    data = _inline_form(Purchase(customer=customer, total=5), [{"id": "", "text": "first"}])
    data["remarks-0-purchase"] = ""
    response = client.post(reverse("admin:testapp_purchase_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    purchase = Purchase.objects.get(customer=customer)
    (remark,) = Remark.objects.filter(purchase=purchase)
    assert remark.text == "first" and remark._state.db == purchase._state.db == customer._state.db


def test_the_admin_delete_view_of_a_parent_deletes_its_followers(client: Client) -> None:
    purchase, _other = purchases_on_two_shards()
    Remark.objects.create(purchase=purchase, text="goes too")
    url = reverse("admin:testapp_purchase_delete", args=[purchase.pk])
    page = client.get(url)
    assert page.status_code == 200 and "goes too" in page.content.decode()
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Remark.objects.filter(purchase_id=purchase.pk).exists()


# -- the audit --------------------------------------------------------------------------------


def _copy_to(obj: Any, alias: str) -> None:
    """A copy of ``obj`` stored on ``alias`` (as a restore gone wrong would leave it)."""
    copy = type(obj)._base_manager.using(obj._state.db).get(pk=obj.pk)
    with allow_off_shard_writes():
        copy.save(using=alias, force_insert=True)


@pytest.mark.parametrize(("model", "method"), [(Remark, "sql"), (OrderLine, "scan")])
def test_the_audit_covers_followers(model: type, method: str) -> None:
    if model is Remark:
        parent, _ = purchases_on_two_shards()
        rows = [Remark.objects.create(purchase=parent) for _ in range(3)]
        stray = Remark(purchase=parent)
        family = [parent.customer, parent]
    else:
        parent = Order.objects.create()
        rows = [OrderLine.objects.create(order=parent) for _ in range(3)]
        stray = OrderLine(order=parent)
        family = [parent]
    assert rows
    results = audit_model(model)
    assert {r.database for r in results} == set(settings.SHARDS)
    assert sum(r.misplaced for r in results) == 0
    wrong = next(a for a in settings.SHARDS if a != parent._state.db)
    for row in family:  # its parent is there too, so its foreign key holds
        _copy_to(row, wrong)
    with allow_off_shard_writes():
        stray.save(using=wrong)
    found = {r.database: r for r in audit_model(model)}
    assert {r.method for r in found.values()} == {method}
    assert found[wrong].misplaced == 1 and found[wrong].samples == [stray.pk]
    assert sum(r.misplaced for r in found.values()) == 1
    out = StringIO()
    with pytest.raises(CommandError, match="1 rows are stored off their shard"):
        call_command("uid_fields", "audit", model._meta.label, stdout=out)
    assert f"{model._meta.label} on {wrong}: 1 misplaced" in out.getvalue()


def test_a_followers_own_admin_lists_changes_and_deletes_it_on_its_shard(client: Client) -> None:
    first, purchase = purchases_on_two_shards()
    shard = purchase._state.db
    remark = Remark.objects.create(purchase=purchase, text="listed")
    other = Remark.objects.create(purchase=first, text="elsewhere")
    listing = client.get(reverse("admin:testapp_remark_changelist"), {"shard": shard})
    assert listing.status_code == 200
    html = listing.content.decode()
    assert str(remark.pk) in html and str(other.pk) not in html
    url = reverse("admin:testapp_remark_change", args=[remark.pk])
    page = client.get(url)
    assert page.status_code == 200 and "uid-parts" in page.content.decode()
    data = {"purchase": str(purchase.pk), "text": "edited"}
    assert client.post(url, data).status_code == 302
    assert Remark.objects.get(purchase=purchase).text == "edited"
    delete = reverse("admin:testapp_remark_delete", args=[remark.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Remark.objects.filter(purchase=purchase).exists()
    assert Remark.objects.filter(purchase=first).get() == other
    assert client.get(reverse("admin:testapp_remark_change", args=[remark.pk])).status_code in (
        302,
        404,
    )
