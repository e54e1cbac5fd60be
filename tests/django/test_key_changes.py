"""A stored row's shard key (or the parent it lives with) may not change to one whose
rows live on another database (issue 35, item 1).

An UPDATE runs where the row is and leaves it there: ``filter(owner_id=new)`` reads the
new key's database and finds nothing, a cascade from the new parent leaves it behind.
The core refuses it (``uid_fields.placement.check_key_change``); these tests hold the
Django adapter to it on ``save()``, ``QuerySet.update()``, ``bulk_update()``, ModelForms,
the admin and DRF serializers, with a plain key (``Photo.owner_id``), a co-located
foreign key (``Purchase.customer``) and a follower's link (``OrderLine.order``). A
change that keeps the row on its database is allowed. Every test ends by reading each
row back by its own key: no row is found only where its key does not look.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django import forms
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.django.testapp.models import Customer, Order, OrderLine, Photo, Purchase
from uid_fields import WrongShardError
from uid_fields.django import allow_off_shard_writes, sharded_atomic
from uid_fields.placement import Placement

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

OWNER = 7


def _placement() -> Placement:
    placement: Placement = Photo._meta.pk.placement  # type: ignore[union-attr]
    return placement


def _keys() -> tuple[int, int]:
    """A key whose rows live with ``OWNER``'s, and one whose rows live elsewhere."""
    placement = _placement()
    home = placement.database_for_key(OWNER)
    same = next(k for k in range(OWNER + 1, 5000) if placement.database_for_key(k) == home)
    other = next(k for k in range(OWNER + 1, 5000) if placement.database_for_key(k) != home)
    return same, other


def _found_by_their_keys() -> None:
    """Every photo on every shard is found by its own key (and nowhere else)."""
    for photo in Photo.objects.on_all_shards():
        found = Photo.objects.filter(owner_id=photo.owner_id).values_list("pk", flat=True)
        assert photo.pk in set(found), f"photo {photo.pk} is lost to its key {photo.owner_id}"


def _three(make: Any) -> tuple[Any, Any, Any]:
    """A row, one on the same shard and one on another (made until there are both)."""
    first = make(0)
    same = other = None
    for i in range(1, 400):
        row = make(i)
        if row._state.db == first._state.db:
            same = same or row
        else:
            other = other or row
        if same is not None and other is not None:
            return first, same, other
    raise AssertionError("no two rows on one shard in 400")


def _customers() -> tuple[Customer, Customer, Customer]:
    """A customer, one on the same shard and one on another."""
    return _three(lambda i: Customer.objects.create(name=str(i)))  # type: ignore[no-any-return]


def _orders() -> tuple[Order, Order, Order]:
    return _three(lambda i: Order.objects.create(note=str(i)))  # type: ignore[no-any-return]


# -- save() -------------------------------------------------------------------------------
def test_save_refuses_a_new_key_on_another_database() -> None:
    same, other = _keys()
    photo = Photo.objects.create(owner_id=OWNER, caption="c")
    home = photo._state.db
    photo.owner_id = other
    with pytest.raises(WrongShardError) as caught:
        photo.save()
    message = str(caught.value)
    assert f"owner_id={other}" in message and home in message
    assert caught.value.database == home
    assert caught.value.expected == _placement().database_for_key(other)
    assert Photo.objects.filter(owner_id=OWNER).get().pk == photo.pk  # unchanged
    assert not Photo.objects.filter(owner_id=other).exists()
    photo.owner_id = same  # a key of the same database: allowed
    photo.save()
    assert Photo.objects.filter(owner_id=same).get().pk == photo.pk
    _found_by_their_keys()


def test_save_with_update_fields_without_the_key_writes_no_key() -> None:
    _same, other = _keys()
    photo = Photo.objects.create(owner_id=OWNER)
    photo.owner_id = other
    photo.caption = "only this"
    photo.save(update_fields=["caption"])  # the key is not written: nothing to refuse
    assert Photo.objects.filter(owner_id=OWNER).get().caption == "only this"
    _found_by_their_keys()


def test_allow_off_shard_writes_lets_a_deliberate_key_change_through() -> None:
    _same, other = _keys()
    photo = Photo.objects.create(owner_id=OWNER)
    photo.owner_id = other
    with allow_off_shard_writes():
        photo.save()
    assert Photo.objects.using(photo._state.db).get(pk=photo.pk).owner_id == other


def test_save_refuses_a_co_located_child_moved_to_a_parent_on_another_shard() -> None:
    first, same, other = _customers()
    purchase = Purchase.objects.create(customer=first, total=1)
    purchase.customer_id = other.pk
    with pytest.raises(WrongShardError, match="customer"):
        purchase.save()
    purchase = Purchase.objects.get(pk=purchase.pk)
    purchase.customer = other  # the object, as a form or serializer assigns it
    with pytest.raises(WrongShardError, match="customer"):
        purchase.save()
    assert list(first.purchases.all()) == [Purchase.objects.get(pk=purchase.pk)]
    other.delete()  # a cascade from the would-be parent: nothing of it left behind
    assert Purchase.objects.filter(customer=first).count() == 1
    purchase = Purchase.objects.get(pk=purchase.pk)
    purchase.customer = same
    purchase.save()
    assert list(Purchase.objects.filter(customer=same).values_list("pk", flat=True)) == [
        purchase.pk
    ]


def test_save_refuses_a_follower_moved_to_a_parent_on_another_shard() -> None:
    first, same, other = _orders()
    line = OrderLine.objects.create(order=first, sku="a")
    line.order_id = other.pk
    with pytest.raises(WrongShardError, match="order"):
        line.save()
    assert [x.pk for x in first.lines.all()] == [line.pk]
    line.order_id = same.pk
    line.save()
    assert [x.pk for x in same.lines.all()] == [line.pk]


# -- QuerySet.update() and bulk_update() ------------------------------------------------
def test_update_refuses_a_key_on_another_database() -> None:
    same, other = _keys()
    photos = [Photo.objects.create(owner_id=OWNER) for _ in range(3)]
    with pytest.raises(WrongShardError, match=f"owner_id={other}"):
        Photo.objects.filter(owner_id=OWNER).update(owner_id=other)
    with pytest.raises(WrongShardError):
        Photo.objects.filter(pk=photos[0].pk).update(owner_id=other)
    with pytest.raises(WrongShardError):  # a fan-out writes every shard: some are other
        Photo.objects.on_all_shards().update(owner_id=same)
    assert Photo.objects.filter(owner_id=OWNER).count() == 3
    assert Photo.objects.filter(owner_id=OWNER).update(owner_id=same) == 3
    assert Photo.objects.filter(owner_id=same).count() == 3
    _found_by_their_keys()


def test_update_refuses_a_co_located_parent_or_followed_parent_on_another_shard() -> None:
    first, same, other = _customers()
    purchase = Purchase.objects.create(customer=first)
    with pytest.raises(WrongShardError, match="customer"):
        Purchase.objects.filter(customer=first).update(customer=other)
    with pytest.raises(WrongShardError, match="customer"):
        Purchase.objects.filter(customer=first).update(customer_id=other.pk)
    assert Purchase.objects.filter(customer=first).get().pk == purchase.pk
    assert Purchase.objects.filter(customer=first).update(customer=same) == 1
    order, order_same, order_other = _orders()
    line = OrderLine.objects.create(order=order)
    with pytest.raises(WrongShardError, match="order"):
        OrderLine.objects.filter(order=order).update(order=order_other)
    assert [x.pk for x in order.lines.all()] == [line.pk]
    assert OrderLine.objects.filter(order=order).update(order=order_same) == 1


def test_bulk_update_refuses_a_key_on_another_database() -> None:
    same, other = _keys()
    photos = [Photo.objects.create(owner_id=OWNER) for _ in range(2)]
    photos[0].owner_id = same
    photos[1].owner_id = other
    with pytest.raises(WrongShardError, match=f"owner_id={other}"):
        Photo.objects.bulk_update(photos, ["owner_id"])
    assert Photo.objects.filter(owner_id=OWNER).count() == 2  # nothing was written
    photos[1].owner_id = OWNER
    photos[1].caption = "kept"
    assert Photo.objects.bulk_update(photos, ["owner_id", "caption"]) == 2
    assert Photo.objects.filter(owner_id=same).get().pk == photos[0].pk
    photos[0].owner_id = other
    Photo.objects.bulk_update(photos, ["caption"])  # the key is not written
    _found_by_their_keys()


# -- forms and the admin ------------------------------------------------------------------
class PhotoForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Photo
        fields = ["owner_id", "caption"]


class PurchaseForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Purchase
        fields = ["customer", "total"]


def test_a_model_form_reports_a_key_change_on_the_field() -> None:
    same, other = _keys()
    photo = Photo.objects.create(owner_id=OWNER)
    form = PhotoForm(data={"owner_id": str(other), "caption": "x"}, instance=photo)
    assert not form.is_valid()
    assert "another shard" in str(form.errors["owner_id"]), form.errors
    form = PhotoForm(data={"owner_id": str(same), "caption": "x"}, instance=photo)
    assert form.is_valid(), form.errors
    form.save()
    assert Photo.objects.filter(owner_id=same).get().caption == "x"
    assert PhotoForm(data={"owner_id": str(other), "caption": "new"}).is_valid()  # a new row
    _found_by_their_keys()


def test_a_model_form_reports_a_parent_on_another_shard_on_the_field() -> None:
    first, same, other = _customers()
    purchase = Purchase.objects.create(customer=first, total=1)
    form = PurchaseForm(data={"customer": str(other.pk), "total": "2"}, instance=purchase)
    assert not form.is_valid()
    assert "another shard" in str(form.errors["customer"]), form.errors
    assert Purchase.objects.get(pk=purchase.pk).customer_id == first.pk
    form = PurchaseForm(
        data={"customer": str(same.pk), "total": "2"},
        instance=Purchase.objects.get(pk=purchase.pk),
    )
    assert form.is_valid(), form.errors
    assert form.save().customer_id == same.pk


@pytest.fixture
def admin_client() -> Client:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _errors(response: Any) -> list[str]:
    return re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)


def test_the_admin_reports_a_key_change_as_a_form_error(admin_client: Client) -> None:
    same, other = _keys()
    photo = Photo.objects.create(owner_id=OWNER)
    url = reverse("admin:testapp_photo_change", args=[photo.pk])
    response = admin_client.post(url, {"owner_id": str(other), "caption": "x"})
    assert response.status_code == 200  # the form again, with the error
    assert any("another shard" in error for error in _errors(response)), _errors(response)
    assert Photo.objects.filter(owner_id=OWNER).get().caption == ""
    response = admin_client.post(url, {"owner_id": str(same), "caption": "x"})
    assert response.status_code == 302, _errors(response)
    assert Photo.objects.filter(owner_id=same).get().caption == "x"
    _found_by_their_keys()


# -- DRF ------------------------------------------------------------------------------------
def test_a_drf_patch_of_the_key_is_a_400_naming_the_field() -> None:
    api = APIClient()
    same, other = _keys()
    photo = Photo.objects.create(owner_id=OWNER)
    response = api.patch(f"/api/photos/{photo.pk}/", {"owner_id": other}, format="json")
    assert response.status_code == 400, response.content
    body = json.loads(response.content)
    assert list(body) == ["owner_id"] and "another shard" in body["owner_id"][0]
    assert Photo.objects.filter(owner_id=OWNER).get().pk == photo.pk
    response = api.patch(f"/api/photos/{photo.pk}/", {"owner_id": same}, format="json")
    assert response.status_code == 200, response.content
    assert Photo.objects.filter(owner_id=same).get().pk == photo.pk
    _found_by_their_keys()


def test_a_drf_patch_to_a_parent_on_another_shard_is_a_400_not_a_500() -> None:
    api = APIClient()
    first, same, other = _customers()
    purchase = Purchase.objects.create(customer=first, total=1)
    url = f"/api/purchases/{purchase.pk}/"
    response = api.patch(url, {"customer": str(other.pk)}, format="json")
    assert response.status_code == 400, response.content
    body = json.loads(response.content)
    assert list(body) == ["customer"] and "another shard" in body["customer"][0]
    assert Purchase.objects.get(pk=purchase.pk).customer_id == first.pk
    response = api.patch(url, {"customer": str(same.pk)}, format="json")
    assert response.status_code == 200, response.content
    assert Purchase.objects.filter(customer=same).get().pk == purchase.pk


def test_moving_a_row_to_a_key_of_another_shard_is_a_copy_and_a_delete() -> None:
    """The documented way (docs/placement.md): a copy under the new key and a delete of
    the old row, in one transaction over both shards."""
    _same, other = _keys()
    old = Photo.objects.create(owner_id=OWNER, caption="moving")
    target = _placement().database_for_key(other)
    with sharded_atomic(old._state.db, target):
        moved = Photo.objects.create(owner_id=other, caption=old.caption)
        old.delete()
    assert moved._state.db == target != old._state.db
    assert not Photo.objects.filter(owner_id=OWNER).exists()
    assert Photo.objects.filter(owner_id=other).get().caption == "moving"
    _found_by_their_keys()
