"""DRF: 64-bit ids are JSON strings, accepted back as strings or ints — when asked for.

String ids come from ``UidModelSerializer`` / ``UidSerializerMixin``; DRF's own
``ModelSerializer`` is left alone unless ``UID_FIELDS["DRF_STRING_IDS"]`` is true.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient

from uid_fields.django import SnowflakeField
from uid_fields.django.rest import (
    IdStringField,
    StringPrimaryKeyRelatedField,
    UidJSONEncoder,
    UidSerializerMixin,
)

from .testapp.api import (
    CustomerSerializer,
    PageViewSerializer,
    PlainCustomerSerializer,
    PlainPurchaseSerializer,
    PurchaseSerializer,
)
from .testapp.models import Customer, Order, PageView, Purchase

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


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


def test_plain_model_serializers_are_left_alone_by_default() -> None:
    # The test project installs rest_framework and uid_fields.django without
    # DRF_STRING_IDS: DRF's ModelSerializer must be exactly as DRF made it.
    mapping = serializers.ModelSerializer.serializer_field_mapping
    assert not any(issubclass(cls, IdStringField) for cls in mapping.values())
    assert SnowflakeField not in mapping
    assert serializers.ModelSerializer.serializer_related_field is (
        serializers.PrimaryKeyRelatedField
    )
    customer = Customer.objects.create(name="x")
    data = PlainCustomerSerializer(customer).data
    assert data["id"] == customer.pk and isinstance(data["id"], int)
    purchase = Purchase.objects.create(customer=customer, total=2)
    data = PlainPurchaseSerializer(purchase).data
    assert data["id"] == purchase.pk and data["customer"] == customer.pk
    assert type(PlainPurchaseSerializer().fields["customer"]) is serializers.PrimaryKeyRelatedField


def test_the_mixin_gives_string_ids() -> None:
    customer = Customer.objects.create(name="x")
    data = CustomerSerializer(customer).data
    assert data["id"] == str(customer.pk)
    serializer = CustomerSerializer(data={"id": str(customer.pk), "name": "y"})
    assert "id" not in serializer.fields or serializer.fields["id"].read_only
    purchase = Purchase.objects.create(customer=customer, total=2)
    data = PurchaseSerializer(purchase).data
    assert data == {"id": str(purchase.pk), "customer": str(customer.pk), "total": 2}
    fields = PurchaseSerializer().fields
    assert isinstance(fields["id"], IdStringField)
    assert type(fields["customer"]) is StringPrimaryKeyRelatedField
    view = PageView(path="/p")
    assert PageViewSerializer(view).data["id"] == str(view.pk)


def test_the_mixin_keeps_hyperlinks_hyperlinks() -> None:
    class Linked(UidSerializerMixin, serializers.HyperlinkedModelSerializer):  # type: ignore[type-arg]
        class Meta:
            model = Purchase
            fields = ["id", "customer"]

    fields = Linked().fields
    assert isinstance(fields["id"], IdStringField)
    assert type(fields["customer"]) is serializers.HyperlinkedRelatedField


def _start_django(installed: list[str], uid_fields: dict[str, Any]) -> dict[str, Any]:
    """Set Django up in a fresh interpreter; what did the app's ready() do to DRF?"""
    script = textwrap.dedent(
        f"""
        import json, sys
        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS={installed!r}, UID_FIELDS={uid_fields!r}, USE_TZ=True,
            DATABASES={{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}}},
        )
        django.setup()
        seen = {{
            "rest_framework": "rest_framework" in sys.modules,
            "uid_fields.django.rest": "uid_fields.django.rest" in sys.modules,
        }}
        if "rest_framework" in settings.INSTALLED_APPS:
            from rest_framework import serializers
            from uid_fields.django import ShardedBigIntField, SnowflakeField

            mapping = serializers.ModelSerializer.serializer_field_mapping
            seen["mapping"] = [
                mapping.get(cls, serializers.IntegerField).__name__
                for cls in (SnowflakeField, ShardedBigIntField)
            ]
            seen["related"] = serializers.ModelSerializer.serializer_related_field.__name__
        print(json.dumps(seen))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


APPS = ["django.contrib.contenttypes", "django.contrib.auth", "uid_fields.django"]


def test_drf_is_untouched_without_the_setting() -> None:
    seen = _start_django([*APPS, "rest_framework"], {})
    assert seen["mapping"] == ["IntegerField", "IntegerField"]
    assert seen["related"] == "PrimaryKeyRelatedField"
    assert seen["uid_fields.django.rest"] is False


def test_ready_imports_no_drf_unless_asked() -> None:
    # rest_framework is importable here, but not an installed app: leave it unimported,
    # with the setting off and even with it on.
    for setting in ({}, {"DRF_STRING_IDS": False}, {"DRF_STRING_IDS": True}):
        seen = _start_django(APPS, setting)
        assert seen == {"rest_framework": False, "uid_fields.django.rest": False}, setting


def test_the_setting_still_patches_every_model_serializer() -> None:
    seen = _start_django([*APPS, "rest_framework"], {"DRF_STRING_IDS": True})
    assert seen["mapping"] == ["IdStringField", "IdStringField"]
    assert seen["related"] == "StringPrimaryKeyRelatedField"
    assert seen["uid_fields.django.rest"] is True


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


class BasketSerializer(UidSerializerMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        from .testapp.models import Basket

        model = Basket
        fields = ["id", "ref"]


@pytest.mark.parametrize("value", ["\u0661\u0662", "\u0661\u0662\u0663\u0664", "\uff11\uff12"])
def test_id_fields_refuse_non_ascii_digits(value: str) -> None:
    assert not BasketSerializer(data={"ref": value}).is_valid()
    field = IdStringField()
    with pytest.raises(serializers.ValidationError):
        field.run_validation(value)


@pytest.mark.parametrize("value", [None, ""])
def test_null_or_empty_for_a_nullable_uid_column_stores_null(value: Any) -> None:
    serializer = BasketSerializer(data={"ref": value})
    assert serializer.is_valid(), serializer.errors
    basket = serializer.save()
    from .testapp.models import Basket

    assert Basket.objects.get(pk=basket.pk).ref is None
