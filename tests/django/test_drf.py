"""DRF: 64-bit ids are JSON strings, accepted back as strings or ints."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from uid_fields.django.rest import UidJSONEncoder

from .testapp.api import CustomerSerializer, PageViewSerializer
from .testapp.models import Customer, Order, PageView, Purchase

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def test_ids_above_2_53_are_strings_in_the_json(api: APIClient) -> None:
    order = Order.objects.create(note="a")
    assert order.pk > 2**53
    body = json.loads(api.get(f"/api/orders/{order.pk}/").content)
    assert body == {"id": str(order.pk), "note": "a"}


def test_list_create_update_with_string_ids(api: APIClient) -> None:
    response = api.post("/api/orders/", {"note": "new"}, format="json")
    assert response.status_code == 201
    created = json.loads(response.content)
    assert isinstance(created["id"], str)
    order = Order.objects.get(pk=int(created["id"]))
    assert order.note == "new"
    patched = api.patch(f"/api/orders/{created['id']}/", {"note": "changed"}, format="json")
    assert patched.status_code == 200
    assert Order.objects.get(pk=order.pk).note == "changed"
    listing = json.loads(api.get("/api/orders/").content)
    assert all(isinstance(item["id"], str) for item in listing)


def test_foreign_keys_to_uid_models_are_strings_both_ways(api: APIClient) -> None:
    customer = Customer.objects.create(name="c")
    for value in (str(customer.pk), customer.pk):
        response = api.post("/api/purchases/", {"customer": value, "total": 3}, format="json")
        assert response.status_code == 201, response.content
        body = json.loads(response.content)
        assert body["customer"] == str(customer.pk) and isinstance(body["id"], str)
        assert Purchase.objects.get(pk=int(body["id"]))._state.db == customer._state.db
    bad = api.post("/api/purchases/", {"customer": "abc", "total": 1}, format="json")
    assert bad.status_code == 400


def test_plain_model_serializers_pick_up_the_mapping() -> None:
    customer = Customer(name="x")
    data = CustomerSerializer(customer).data
    assert data["id"] == str(customer.pk)
    serializer = CustomerSerializer(data={"id": str(customer.pk), "name": "y"})
    assert "id" not in serializer.fields or serializer.fields["id"].read_only
    view = PageView(path="/p")
    assert PageViewSerializer(view).data["id"] == str(view.pk)


def test_time_range_filter_backend(api: APIClient) -> None:
    old = Order.objects.create(note="old")
    since = datetime.now(UTC) + timedelta(milliseconds=5)
    import time

    time.sleep(0.02)
    new = Order.objects.create(note="new")
    listing = json.loads(api.get("/api/orders/", {"created_after": since.isoformat()}).content)
    ids = [item["id"] for item in listing]
    assert str(new.pk) in ids and str(old.pk) not in ids
    assert api.get("/api/orders/", {"created_after": "yesterday"}).status_code == 400


def test_bad_ids_in_api_urls_are_404(api: APIClient) -> None:
    for bad in ("abc", str(2**63), "-4"):
        assert api.get(f"/api/orders/{bad}/").status_code == 404


def test_json_encoder_stringifies_only_unsafe_ints() -> None:
    text = json.dumps({"a": 2**53 - 1, "b": 2**53, "c": [-(2**60), True]}, cls=UidJSONEncoder)
    assert json.loads(text) == {"a": 2**53 - 1, "b": str(2**53), "c": [str(-(2**60)), True]}
