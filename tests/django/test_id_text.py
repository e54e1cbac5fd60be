"""Ids given as text follow the core's one rule in Django too (as in SQLAlchemy:
``tests/sqlalchemy/test_id_values.py``): 1 to 20 ASCII digits, leading zeros allowed,
nothing else. The URL converters match exactly that text; a form strips the spaces a
person typed before the rule applies, as every Django form field does."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from uid_fields import ShardKeyError

from .testapp.models import Order, Photo

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

NOT_IDS = ["{} ", " {}", "{}\n", "\t{}", "+{}", "{}.0", "0x{:x}", "{:_}"]


@pytest.mark.parametrize("form", NOT_IDS)
def test_lookups_and_to_python_follow_the_core_rule(form: str) -> None:
    order = Order.objects.create(note="text")
    text = form.format(order.id)
    with pytest.raises(Order.DoesNotExist):
        Order.objects.get(pk=text)
    assert list(Order.objects.filter(pk__in=[text])) == []
    with pytest.raises(ValidationError):
        Order._meta.pk.to_python(text)  # type: ignore[union-attr]
    assert Order.objects.get(pk=f"00{order.id}") == order  # leading zeros: the same id


def test_a_form_strips_what_a_person_typed() -> None:
    order = Order.objects.create(note="form")
    field = Order._meta.pk.formfield()  # type: ignore[union-attr]
    assert field.clean(f" {order.id}\n") == order.id
    with pytest.raises(ValidationError):
        field.clean(f"+{order.id}")


def test_a_bad_shard_key_is_named_as_the_key() -> None:
    with pytest.raises(ShardKeyError, match=r"Photo\.owner_id='abc'"):
        Photo(owner_id="abc").save()
