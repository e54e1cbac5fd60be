"""bulk_create: every object gets an id, one INSERT batch per shard, ids returned."""

from __future__ import annotations

from collections import Counter

import pytest
from django.conf import settings

from .helpers import capture_all
from .testapp.models import Order, PageView, Photo, Tag

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_bulk_create_1000_lands_on_every_shard_in_one_batch_each() -> None:
    objs = [Order(note=str(i)) for i in range(1000)]
    for obj in objs:
        obj.id = None  # as if built elsewhere: the manager must fill them
    with capture_all() as log:
        created = Order.objects.bulk_create(objs)
    assert created is not None and len(created) == 1000
    ids = [o.pk for o in created]
    assert None not in ids and len(set(ids)) == 1000
    per_shard = Counter(o._state.db for o in created)
    assert set(per_shard) == set(settings.SHARDS)
    for alias in settings.SHARDS:
        inserts = log.count(alias, "INSERT")
        assert 1 <= inserts <= 2, (alias, inserts)  # SQLite may split on its variable limit
        assert Order.objects.using(alias).count() == per_shard[alias]
    assert log.count("default") == 0


def test_bulk_create_uses_the_batch_path_and_keeps_order() -> None:
    objs = [Order(note=str(i)) for i in range(50)]
    created = Order.objects.bulk_create(objs)
    assert [o.note for o in created] == [str(i) for i in range(50)]
    assert [o.pk for o in created] == sorted(o.pk for o in created)


def test_bulk_create_with_shard_keys_and_uuids() -> None:
    photos = Photo.objects.bulk_create([Photo(owner_id=i % 3) for i in range(30)])
    field = Photo._meta.pk
    assert {p.id_parts.shard for p in photos} == {
        field.placement.logical_shard_for_key(k)  # type: ignore[union-attr]
        for k in (0, 1, 2)
    }
    views = PageView.objects.bulk_create([PageView(path=f"/{i}") for i in range(40)])
    assert len({v.pk for v in views}) == 40
    for view in views[:5]:
        assert PageView.objects.get(pk=view.pk).path == view.path


def test_bulk_create_of_an_unsharded_model_fills_non_key_ids() -> None:
    tags = Tag.objects.bulk_create([Tag(name=str(i)) for i in range(10)])
    stored = list(Tag.objects.order_by("ref").values_list("ref", flat=True))
    assert stored == sorted(t.ref for t in tags) and len(set(stored)) == 10
