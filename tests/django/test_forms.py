"""Forms over sharded models: bad shard keys are form errors, never exceptions."""

from __future__ import annotations

import pytest
from django import forms

from tests.django.testapp.models import Customer, Purchase
from uid_fields import ShardKeyError

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


class PurchaseForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Purchase
        fields = ["customer", "total"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "This field is required."),
        ("abc", "Select a valid choice"),
        ("-1", "Select a valid choice"),
        (str(2**63), "Select a valid choice"),
        (str(2**64 - 1), "Select a valid choice"),
        ("383270324000792576", "Select a valid choice"),
    ],
)
def test_a_missing_or_invalid_shard_key_is_a_form_error(value: str, message: str) -> None:
    Customer.objects.create(name="x")
    form = PurchaseForm(data={"customer": value, "total": 1})
    assert not form.is_valid()
    assert message in str(form.errors["customer"])


def test_a_valid_form_saves_the_row_on_its_customers_shard() -> None:
    customer = Customer.objects.create(name="x")
    form = PurchaseForm(data={"customer": str(customer.pk), "total": 3})
    assert form.is_valid(), form.errors
    purchase = form.save()
    assert purchase._state.db == customer._state.db


def test_full_clean_without_a_shard_key_reports_the_field() -> None:
    purchase = Purchase(total=1)
    with pytest.raises(Exception) as caught:
        purchase.full_clean()
    assert "customer" in getattr(caught.value, "message_dict", {})
    with pytest.raises(ShardKeyError, match="must be set"):
        purchase.save()


def test_a_select_box_over_a_sharded_model_lists_every_shard_in_id_order() -> None:
    customers = [Customer.objects.create(name=f"c{i}") for i in range(12)]
    assert len({c._state.db for c in customers}) > 1
    form = PurchaseForm()
    html = str(form["customer"])
    values = [str(pk) for pk, _label in form.fields["customer"].choices if pk != ""]
    assert values == sorted((str(c.pk) for c in customers), key=int)
    assert all(f'value="{c.pk}"' in html for c in customers)


def test_drf_choices_over_a_sharded_model_come_from_every_shard() -> None:
    from rest_framework import serializers

    from uid_fields.django.rest import UidSerializerMixin

    class PurchaseSerializer(UidSerializerMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
        class Meta:
            model = Purchase
            fields = ["id", "customer", "total"]

    customers = [Customer.objects.create(name=f"c{i}") for i in range(12)]
    choices = PurchaseSerializer().fields["customer"].get_choices()
    assert sorted(str(k) for k in choices) == sorted(str(c.pk) for c in customers)
