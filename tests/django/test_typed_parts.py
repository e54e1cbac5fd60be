"""``id_parts = IdParts(SnowflakeParts)`` on a Django model: what type checkers read
(``tests/typecheck``) is what the field decodes at run time."""

from __future__ import annotations

import pytest
from django.db import models
from django.test.utils import isolate_apps

from uid_fields import DecimalParts, IdParts, LocalityParts, SnowflakeParts
from uid_fields.django import LocalityUUIDField, ShardedManager, SnowflakeField

from .testapp.models import Order


@isolate_apps("tests.django.testapp")
def test_a_declared_id_parts_decodes_like_the_fields_own() -> None:
    class TypedTicket(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        id_parts = IdParts(SnowflakeParts)

        class Meta:
            app_label = "testapp"

    class TypedVisit(models.Model):
        id = LocalityUUIDField(primary_key=True, generator="events")
        id_parts = IdParts(LocalityParts)

        class Meta:
            app_label = "testapp"

    ticket = TypedTicket()
    assert isinstance(ticket.id_parts, SnowflakeParts)
    assert ticket.id_parts == TypedTicket._meta.pk.decode(ticket.id)  # type: ignore[union-attr]
    assert ticket.id_parts.datetime == Order(id=ticket.id).id_parts.datetime
    assert TypedVisit().id_parts.pid >= 0
    ticket.id = None  # type: ignore[assignment]
    assert ticket.id_parts is None  # None exactly when the id is


@isolate_apps("tests.django.testapp")
def test_a_declared_class_the_ids_do_not_decode_to_is_refused() -> None:
    class MisdeclaredLegacy(models.Model):
        id = SnowflakeField(primary_key=True, generator="legacy")  # a decimal generator
        id_parts = IdParts(SnowflakeParts)

        class Meta:
            app_label = "testapp"

    row = MisdeclaredLegacy()
    with pytest.raises(TypeError, match=r"IdParts\(SnowflakeParts\).*IdParts\(DecimalParts\)"):
        _ = row.id_parts
    assert isinstance(MisdeclaredLegacy._meta.pk.decode(row.id), DecimalParts)  # type: ignore[union-attr]


@isolate_apps("tests.django.testapp")
def test_a_declared_id_parts_passes_the_system_checks() -> None:
    """The line docs/typing.md recommends is the field's own attribute, not a clash
    (it was E010, "id_parts is already defined", so ``manage.py check`` failed)."""

    class CheckedTicket(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        id_parts = IdParts(SnowflakeParts)
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    assert [m.id for m in CheckedTicket.check()] == []


@isolate_apps("tests.django.testapp")
def test_another_attribute_under_the_parts_name_is_still_e010() -> None:
    class Clashing(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        id_parts = "taken"
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    assert [m.id for m in Clashing.check()] == ["uid_fields.E010"]
