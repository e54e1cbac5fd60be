"""Closed databases (``"closed"`` in a shard map): no new keys there, old rows usable."""

from __future__ import annotations

import copy

import pytest
from django.conf import settings
from django.test.utils import override_settings

from tests.django.testapp.models import Order, Photo

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def closing(*aliases: str) -> override_settings:
    config = copy.deepcopy(settings.UID_FIELDS)
    config["SHARDS"]["main"]["closed"] = list(aliases)
    return override_settings(UID_FIELDS=config)


def test_new_rows_of_a_key_on_a_closed_database_go_elsewhere() -> None:
    before = [Photo.objects.create(owner_id=owner, caption="before") for owner in range(40)]
    on_closed = [p.owner_id for p in before if p._state.db == "shard_0"]
    assert on_closed
    with closing("shard_0"):
        after = [Photo.objects.create(owner_id=owner, caption="after") for owner in range(40)]
        assert "shard_0" not in {p._state.db for p in after}
        for owner in on_closed:  # the old row (on shard_0) and the new one, one query
            found = Photo.objects.filter(owner_id=owner)
            assert sorted(p.caption for p in found) == ["after", "before"]
        kept = Photo.objects.get(owner_id=on_closed[0], caption="before")
        kept.caption = "edited"  # rows on a closed database stay writable
        kept.save()
        assert kept._state.db == "shard_0"
        assert Photo.objects.get(pk=kept.pk).caption == "edited"
        orders = [Order.objects.create(note=str(i)) for i in range(40)]  # no key at all
        assert "shard_0" not in {o._state.db for o in orders}
        Order.objects.bulk_create([Order(note="bulk") for _ in range(40)])
        assert not Order.objects.using("shard_0").exists()
