"""Relations between sharded rows and ordinary models, and the copy idiom."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.django.testapp.models import Basket, Coupon, Customer, Note, Order, PageView

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_ordinary_models_reached_from_a_sharded_row_are_read_from_default() -> None:
    coupon = Coupon.objects.create(code="WELCOME")
    user = User.objects.create(username="ann")
    basket = Basket.objects.create(coupon=coupon, created_by=user)
    loaded = Basket.objects.get(pk=basket.pk)
    assert loaded._state.db != "default"
    assert loaded.coupon == coupon and loaded.coupon._state.db == "default"  # type: ignore[union-attr]
    assert loaded.created_by == user  # type: ignore[comparison-overlap]


def test_a_reverse_relation_from_default_is_read_from_default() -> None:
    customer = Customer.objects.create(name="c")
    Note.objects.create(customer=customer, text="vip")
    loaded = Customer.objects.get(pk=customer.pk)
    assert [n.text for n in loaded.notes.all()] == ["vip"]  # type: ignore[attr-defined]
    assert loaded.notes.db == "default"  # type: ignore[attr-defined]


@pytest.mark.parametrize("model", [Order, PageView], ids=["snowflake", "locality"])
def test_the_copy_idiom_stores_the_copy_where_its_new_id_says(model: type) -> None:
    extra = {"path": "/x"} if model is PageView else {}
    original = model.objects.create(**extra)
    field = model._meta.pk
    for _ in range(12):
        copy = model.objects.get(pk=original.pk)
        copy.pk = None
        copy.save()
        assert copy.pk != original.pk
        home = field.placement.database_of(copy.pk)
        assert copy._state.db == home
        assert model.objects.using(home).filter(pk=copy.pk).exists()
        others = [a for a in field.placement.databases if a != home]
        assert not any(model.objects.using(a).filter(pk=copy.pk).exists() for a in others)
