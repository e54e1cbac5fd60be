"""Writes over several shards: all-or-nothing up to the commit phase."""

from __future__ import annotations

import pytest
from django.db import IntegrityError

from tests.django.testapp.models import Order
from uid_fields.django import sharded_atomic

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__", transaction=True)]


def test_bulk_create_over_shards_leaves_nothing_when_one_shard_fails() -> None:
    existing = Order.objects.create(note="there")
    home = existing._state.db
    new = [Order(note=str(i)) for i in range(40)]
    placement = Order._meta.pk.placement  # type: ignore[union-attr]
    # The failing shard last, so the other shards' inserts have run when it fails.
    new.sort(key=lambda o: placement.database_of(o.pk) == home)
    clash = Order(pk=existing.pk, note="clash")
    assert len({placement.database_of(o.pk) for o in new}) == 4
    with pytest.raises(IntegrityError):
        Order.objects.bulk_create([*new, clash])
    assert list(Order.objects.on_all_shards().values_list("note", flat=True)) == ["there"]


def test_sharded_atomic_rolls_back_every_shard() -> None:
    orders = [Order(note=str(i)) for i in range(20)]
    placement = Order._meta.pk.placement  # type: ignore[union-attr]
    aliases = sorted({placement.database_of(o.pk) for o in orders})
    assert len(aliases) > 1
    with pytest.raises(RuntimeError), sharded_atomic(*aliases):
        for order in orders:
            order.save()
        assert Order.objects.on_all_shards().count() == 20
        raise RuntimeError("something failed after the writes")
    assert Order.objects.on_all_shards().count() == 0
    with sharded_atomic(*aliases):
        for order in orders:
            order.save(force_insert=True)
    assert Order.objects.on_all_shards().count() == 20
