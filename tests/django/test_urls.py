"""Path converters: well-formed ids reach the view, anything else is a 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from .testapp.models import Customer, Order, PageView, Purchase

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_snowflake_and_sharded_converters() -> None:
    order = Order.objects.create()
    client = Client()
    body = json.loads(client.get(f"/orders/{order.pk}/").content)
    assert body == {"id": str(order.pk), "shard": order._state.db}
    assert reverse("order-detail", args=[order.pk]) == f"/orders/{order.pk}/"
    assert client.get(f"/sharded/{order.pk}/").status_code == 200
    for bad in ["abc", "-1", "1.5", str(2**64), "9" * 21]:
        assert client.get(f"/orders/{bad}/").status_code == 404
    assert client.get(f"/sharded/{2**63}/").status_code == 404
    assert client.get("/orders/12345/").status_code == 404  # well-formed, not there


def test_locality_uuid_converter() -> None:
    view = PageView.objects.create(path="/")
    client = Client()
    assert client.get(f"/views/{view.pk}/").status_code == 200
    for bad in [
        "not-a-uuid",
        "20be0ffc-314a-7d53-7a50-013a65ca76d2",
        str(view.pk).replace("-", ""),
    ]:
        assert client.get(f"/views/{bad}/").status_code == 404


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, 2**63 - 1])
def test_a_shard_key_in_a_url_that_no_row_can_have_is_a_404(client: Any, value: int) -> None:
    response = client.get(f"/customers/{value}/purchases/")
    assert response.status_code == 404


def test_a_customers_purchases_by_url(client: Any) -> None:
    customer = Customer.objects.create(name="c")
    purchase = Purchase.objects.create(customer=customer)
    response = client.get(f"/customers/{customer.pk}/purchases/")
    assert response.status_code == 200
    assert response.json() == {"purchases": [str(purchase.pk)]}
