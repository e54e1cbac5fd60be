"""Choice lists of rows on shards (issue 25, item 6; issue 36, item 2).

A choice list of a sharded model lists every shard's rows where it asks for them
explicitly: a relation to the model (ModelForms, the admin's list filters,
django-filter's generated filters, DRF's related fields, through
``get_limit_choices_to()``), ``ShardedModelChoiceField`` (its iterator) or
``for_choices()``. Nothing looks at the call stack: outside a choice list, and in a
plain ``ModelChoiceField`` over the default manager, the same query names no shard and
is refused.
"""

from __future__ import annotations

import json

import pytest
from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from uid_fields import ShardRoutingError
from uid_fields.django.choices import (
    ShardedModelChoiceField,
    ShardedModelChoiceIterator,
    ShardedModelMultipleChoiceField,
)

from .helpers import capture_all
from .testapp.api import PlainPurchaseSerializer, PurchaseFilter
from .testapp.models import Customer, Purchase, Ticket, Workspace

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def customers_on_every_shard() -> list[Customer]:
    """Two customers per shard (a snowflake's shard is a hash of the id)."""
    made: list[Customer] = []
    for alias in settings.SHARDS:
        while sum(c._state.db == alias for c in made) < 2:
            customer = Customer(name=f"c{len(made)}")
            if Customer._meta.pk.placement.database_of(customer.pk) == alias:  # type: ignore[attr-defined]
                customer.save()
                made.append(customer)
    return made


def test_a_filterset_over_a_key_to_sharded_rows_renders_in_the_browsable_api() -> None:
    customers = customers_on_every_shard()
    for customer in customers:
        Purchase.objects.create(customer=customer, total=1)
    page = APIClient().get("/api/filtered-purchases/", HTTP_ACCEPT="text/html")
    assert page.status_code == 200
    html = page.content.decode()
    for customer in customers:
        assert f'value="{customer.pk}"' in html


def test_the_filter_reads_the_chosen_customers_rows() -> None:
    customers = customers_on_every_shard()
    mine = [Purchase.objects.create(customer=c, total=i) for i, c in enumerate(customers)]
    chosen = customers[5]
    response = APIClient().get("/api/filtered-purchases/", {"customer": str(chosen.pk)})
    assert response.status_code == 200
    body = json.loads(response.content)
    assert [int(row["id"]) for row in body] == [mine[5].pk]
    bad = APIClient().get("/api/filtered-purchases/", {"customer": "123"})
    assert bad.status_code == 400  # a choice no shard holds: a form error


def test_the_filterset_form_lists_every_shard() -> None:
    customers = customers_on_every_shard()
    field = PurchaseFilter(queryset=Purchase.objects.on_all_shards()).form.fields["customer"]
    listed = [str(value) for value, _label in field.choices if value != ""]
    assert listed == [str(c.pk) for c in sorted(customers, key=lambda c: c.pk)]


def test_a_sharded_model_choice_field_over_the_default_manager_lists_every_shard() -> None:
    customers = customers_on_every_shard()
    field = ShardedModelChoiceField(queryset=Customer.objects.all())
    listed = [str(value) for value, _label in field.choices if value != ""]
    assert listed == [str(c.pk) for c in sorted(customers, key=lambda c: c.pk)]
    assert len(field.choices) == len(customers) + 1  # and the empty choice
    assert bool(field.choices)
    assert field.clean(str(customers[3].pk)) == customers[3]  # read on its own shard
    many = ShardedModelMultipleChoiceField(queryset=Customer._default_manager.all())
    assert len([v for v, _label in many.choices]) == len(customers)
    assert many.clean([str(customers[0].pk), str(customers[7].pk)]).count() == 2


def test_a_choice_list_with_prefetched_rows_lists_every_shard() -> None:
    customers = customers_on_every_shard()
    for customer in customers:
        Purchase.objects.create(customer=customer, total=2)
    field = ShardedModelChoiceField(queryset=Customer.objects.prefetch_related("purchases"))
    listed = [choice.instance for choice, _label in field.choices if choice != ""]
    assert sorted(c.pk for c in listed) == sorted(c.pk for c in customers)
    with capture_all() as log:
        assert all(len(c.purchases.all()) == 1 for c in listed)  # prefetched on each shard
    assert log.count() == 0


def test_a_multiple_choice_field_by_a_unique_field_checks_every_shard() -> None:
    workspaces = [Workspace.objects.create(slug=f"w{i}") for i in range(12)]
    assert len({w._state.db for w in workspaces}) > 1
    field = ShardedModelMultipleChoiceField(queryset=Workspace.objects.all(), to_field_name="slug")
    assert sorted(str(v) for v, _label in field.choices) == sorted(w.slug for w in workspaces)
    chosen = field.clean([w.slug for w in workspaces[:5]])  # slug__in: every shard
    assert sorted(w.pk for w in chosen) == sorted(w.pk for w in workspaces[:5])
    with pytest.raises(forms.ValidationError):
        field.clean(["w0", "nope"])


def test_drf_related_field_choices_list_every_shard() -> None:
    customers = customers_on_every_shard()
    field = PlainPurchaseSerializer().fields["customer"]
    assert set(field.get_choices()) == {c.pk for c in customers}


def test_the_same_query_outside_a_choice_list_is_still_refused() -> None:
    customers_on_every_shard()
    field = ShardedModelChoiceField(queryset=Customer.objects.all())
    assert len(list(field.choices)) == 9
    with pytest.raises(ShardRoutingError):
        list(field.queryset)
    with pytest.raises(ShardRoutingError):
        Customer.objects.count()
    # Django's own field asks for nothing: its query is refused, as any other
    with pytest.raises(ShardRoutingError):
        list(forms.ModelChoiceField(queryset=Customer.objects.all()).choices)


def test_a_flagged_query_lists_every_shard_in_django_s_own_field() -> None:
    customers = customers_on_every_shard()
    field = forms.ModelChoiceField(queryset=Customer.objects.for_choices())
    listed = [str(value) for value, _label in field.choices if value != ""]
    assert listed == [str(c.pk) for c in sorted(customers, key=lambda c: c.pk)]
    assert field.clean(str(customers[2].pk)) == customers[2]
    with pytest.raises(ShardRoutingError):
        list(Customer.objects.filter(name="c1"))  # the flag is the query's, not the model's


class Reversed(ShardedModelChoiceIterator):
    """An iterator of one's own that overrides ``__iter__`` without calling its base's."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        rows = list(self.queryset)
        for row in reversed(rows):
            yield self.choice(row)


class PlainReversed(forms.models.ModelChoiceIterator):
    def __iter__(self):  # type: ignore[no-untyped-def]
        for row in reversed(list(self.queryset)):
            yield self.choice(row)


def test_a_subclassed_iterator_behaves_as_its_base() -> None:
    """Before, a ModelChoiceIterator subclass overriding ``__iter__`` was refused
    (ShardRoutingError) while Django's own listed the choices: the stack held no method
    of Django's. Now the queryset carries what it is read for."""
    customers = customers_on_every_shard()
    expected = sorted(str(c.pk) for c in customers)
    mine = ShardedModelChoiceField(queryset=Customer.objects.all(), empty_label=None)
    mine.iterator = Reversed
    assert sorted(str(value) for value, _label in mine.choices) == expected
    theirs = forms.ModelChoiceField(queryset=Customer.objects.for_choices(), empty_label=None)
    theirs.iterator = PlainReversed
    assert sorted(str(value) for value, _label in theirs.choices) == expected
    django_own = forms.ModelChoiceField(queryset=Customer.objects.for_choices(), empty_label=None)
    assert sorted(str(value) for value, _label in django_own.choices) == expected


def test_model_field_choices_list_every_shard() -> None:
    """``Field.get_choices()``: what the admin's RelatedFieldListFilter lists."""
    workspaces = [Workspace.objects.create(slug=f"w{i}") for i in range(12)]
    assert len({w._state.db for w in workspaces}) > 1
    choices = Ticket._meta.get_field("workspace").get_choices(include_blank=False)
    assert sorted(pk for pk, _label in choices) == sorted(w.pk for w in workspaces)
    tickets = [Ticket.objects.create(workspace=w, number=1) for w in workspaces]
    reverse_choices = Workspace._meta.get_field("tickets").get_choices(include_blank=False)
    assert sorted(pk for pk, _label in reverse_choices) == sorted(t.pk for t in tickets)


def test_an_admin_list_filter_over_a_key_to_sharded_rows_lists_every_shard() -> None:
    workspaces = [Workspace.objects.create(slug=f"w{i}") for i in range(12)]
    assert len({w._state.db for w in workspaces}) > 1
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    page = client.get(reverse("admin:testapp_ticket_changelist"))
    assert page.status_code == 200
    html = page.content.decode()
    for workspace in workspaces:
        assert f"workspace__id__exact={workspace.pk}" in html
