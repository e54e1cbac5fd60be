"""Path converters: well-formed ids reach the view, anything else is a 404."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from .testapp.models import Order, PageView

pytestmark = pytest.mark.django_db(databases="__all__")


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
