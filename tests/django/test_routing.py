"""Every ORM path reaches the shard the id names, without using=, in one query."""

from __future__ import annotations

from collections import Counter

import pytest
from django.conf import settings
from django.db.models import Count, Max

from uid_fields.django import ShardRoutingError

from .helpers import capture_all
from .testapp.models import LegacyRow, Order, PageView, Photo, PhpRow

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]
SHARDS = settings.SHARDS


def shard_of(obj: object) -> str:
    field = type(obj)._meta.pk
    return field.shard_map.database_for(field.value_from_object(obj))  # type: ignore[union-attr]


def test_save_is_exactly_one_insert_on_the_id_shard() -> None:
    order = Order(note="x")
    expected = shard_of(order)
    with capture_all() as log:
        order.save()
    assert log.count() == 1
    assert log.count(expected, "INSERT") == 1
    assert order._state.db == expected


@pytest.mark.parametrize("model", [Order, PageView, LegacyRow, PhpRow])
def test_create_and_get_route_every_id_kind(model: type) -> None:
    obj = model.objects.create()
    with capture_all() as log:
        again = model.objects.get(pk=obj.pk)
    assert again == obj and again._state.db == shard_of(obj)
    assert log.count() == 1 and log.aliases() == {shard_of(obj)}
    with capture_all() as log:
        assert model.objects.filter(id=str(obj.pk)).exists()
    assert log.aliases() == {shard_of(obj)}


def test_rows_spread_over_all_shards_even_one_at_a_time() -> None:
    orders = [Order.objects.create() for _ in range(400)]
    counts = Counter(o._state.db for o in orders)
    assert set(counts) == set(SHARDS)
    assert min(counts.values()) > 50, counts
    for alias in SHARDS:
        assert Order.objects.using(alias).count() == counts[alias]


def test_pk_in_groups_per_shard_and_merges_in_id_order() -> None:
    orders = [Order.objects.create(note=str(i)) for i in range(40)]
    wanted = [o.pk for o in orders[::3]]
    with capture_all() as log:
        found = list(Order.objects.filter(pk__in=reversed(wanted)))
    assert [o.pk for o in found] == sorted(wanted)
    involved = {shard_of(o) for o in orders[::3]}
    assert log.aliases() == involved
    assert all(log.count(alias) == 1 for alias in involved)


def test_in_bulk_groups_per_shard() -> None:
    orders = [Order.objects.create() for _ in range(20)]
    ids = [o.pk for o in orders]
    with capture_all() as log:
        found = Order.objects.in_bulk([*ids, 12345])
    assert set(found) == set(ids)
    absent = Order._meta.pk.placement.database_of(12345)  # type: ignore[union-attr]
    assert log.count() == len({shard_of(o) for o in orders} | {absent})
    assert found[ids[0]]._state.db == shard_of(orders[0])


def test_get_or_create_and_update_or_create() -> None:
    order = Order.objects.create(note="a")
    found, created = Order.objects.get_or_create(pk=order.pk, defaults={"note": "b"})
    assert (found, created) == (order, False)
    fresh, created = Order.objects.get_or_create(note="unique-note")
    assert created and fresh._state.db == shard_of(fresh)
    again, created = Order.objects.get_or_create(note="unique-note")  # searched on every shard
    assert not created and again.pk == fresh.pk
    updated, created = Order.objects.update_or_create(pk=order.pk, defaults={"note": "c"})
    assert not created and updated.note == "c"
    assert Order.objects.using(shard_of(order)).get(pk=order.pk).note == "c"
    made, created = Order.objects.update_or_create(note="nowhere", defaults={"note": "nowhere"})
    assert created and Order.objects.get(pk=made.pk).note == "nowhere"


def test_delete_refresh_and_save_again_stay_on_the_shard() -> None:
    order = Order.objects.create(note="a")
    alias = shard_of(order)
    Order.objects.filter(pk=order.pk).update(note="b")
    with capture_all() as log:
        order.refresh_from_db()
    assert order.note == "b" and log.aliases() == {alias}
    order.note = "c"
    with capture_all() as log:
        order.save()
    assert log.aliases() == {alias} and log.count(alias, "UPDATE") == 1
    with capture_all() as log:
        order.delete()
    assert log.aliases() == {alias}
    assert not Order.objects.filter(pk=order.pk).exists()


def test_unroutable_query_raises_instead_of_reading_default() -> None:
    Order.objects.create(note="x")
    with pytest.raises(ShardRoutingError, match="on_all_shards"):
        list(Order.objects.filter(note="x"))
    with pytest.raises(ShardRoutingError):
        Order.objects.count()


def test_on_all_shards_merges_in_id_order_and_pushes_down_limits() -> None:
    orders = [Order.objects.create(note="fan") for _ in range(30)]
    with capture_all() as log:
        newest = list(Order.objects.on_all_shards().order_by("-id")[:5])
    assert [o.pk for o in newest] == sorted((o.pk for o in orders), reverse=True)[:5]
    assert log.aliases() == set(SHARDS)
    assert all(" LIMIT 5" in sql for a in SHARDS for sql in log.sql(a))
    everything = list(Order.objects.on_all_shards().filter(note="fan"))
    assert [o.pk for o in everything] == sorted(o.pk for o in orders)
    assert Order.objects.on_all_shards().count() == 30
    assert Order.objects.on_all_shards().exists()
    assert Order.objects.on_all_shards().first().pk == min(o.pk for o in orders)
    assert Order.objects.on_all_shards().last().pk == max(o.pk for o in orders)
    assert Order.objects.on_all_shards()[10:12][0].pk == sorted(o.pk for o in orders)[10]
    stats = Order.objects.on_all_shards().aggregate(n=Count("id"), top=Max("id"))
    assert stats == {"n": 30, "top": max(o.pk for o in orders)}
    assert Order.objects.on_all_shards().update(note="upd") == 30
    assert list(Order.objects.on_all_shards().values_list("pk", flat=True)) == sorted(
        o.pk for o in orders
    )
    assert Order.objects.on_all_shards().delete()[0] == 30


def test_shard_key_keeps_an_owner_together_and_routes_filters() -> None:
    photos = [Photo.objects.create(owner_id=31341) for _ in range(10)]
    assert len({p._state.db for p in photos}) == 1
    with capture_all() as log:
        mine = list(Photo.objects.filter(owner_id=31341))
    assert len(mine) == 10 and log.aliases() == {photos[0]._state.db}
    owners = [Photo.objects.create(owner_id=owner) for owner in range(0, 8192, 512)]
    assert {p._state.db for p in owners} == set(SHARDS)


def test_shard_key_set_after_construction() -> None:
    photo = Photo()
    photo.owner_id = 7
    with capture_all() as log:
        photo.save()
    expected = Photo._meta.pk.placement.logical_shard_for_key(7)  # type: ignore[union-attr]
    assert photo.id_parts.shard == expected and log.count() == 1


def test_missing_shard_key_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="owner_id must be set"):
        Photo().save()


def test_bad_ids_never_crash_deeper() -> None:
    with capture_all() as log, pytest.raises(Order.DoesNotExist):
        Order.objects.get(pk="abc")  # a malformed id matches nothing: a 404, never a 500
    assert log.count() == 0
    assert list(Order.objects.filter(pk__in=["abc", "-1"])) == []
    assert Order.objects.on_all_shards().exclude(pk="abc").count() == 0
    with pytest.raises(Order.DoesNotExist):
        Order.objects.get(pk=2**63)
    with pytest.raises(Order.DoesNotExist):
        Order.objects.get(pk=-5)
    with pytest.raises(PageView.DoesNotExist):
        PageView.objects.get(pk="not-a-uuid")
    with pytest.raises(PhpRow.DoesNotExist):
        PhpRow.objects.get(pk="x")


def test_routing_by_shard_key_builds_no_throwaway_object() -> None:
    from django.db.models.signals import post_init

    built: list[object] = []

    def count(sender: type, instance: object, **kwargs: object) -> None:
        built.append(instance)

    post_init.connect(count, sender=Photo)
    try:
        qs = Photo.objects.filter(owner_id=77)
        assert qs.shard_aliases == (Photo._meta.pk.placement.database_for_key(77),)  # type: ignore[union-attr]
    finally:
        post_init.disconnect(count, sender=Photo)
    assert built == []


def test_fan_out_keeps_django_semantics_or_refuses() -> None:
    orders = [Order.objects.create(note=f"n{i % 3}") for i in range(8)]
    by_id = sorted(orders, key=lambda o: o.pk)
    fan = Order.objects.on_all_shards()
    assert fan[6:].exists() and not fan[8:].exists()
    assert fan[6:].count() == 2
    with pytest.raises(TypeError, match="slice"):
        fan[6:].update(note="x")
    with pytest.raises(TypeError, match="delete"):
        fan[6:].delete()
    assert fan.count() == 8  # nothing was touched
    # values() without the ordering column still merges in id order.
    assert list(fan.values_list("note", flat=True)) == [o.note for o in by_id]
    assert list(fan.values("note")[:3]) == [{"note": o.note} for o in by_id[:3]]
    assert list(fan.order_by("-note", "pk").values_list("pk", flat=True)) == [
        o.pk for o in sorted(by_id, key=lambda o: o.note, reverse=True)
    ]
    # GROUP BY, DISTINCT and count(DISTINCT) over shards answer as one database would
    assert fan.aggregate(n=Count("note", distinct=True)) == {"n": 3}
    notes = Counter(o.note for o in orders)
    assert sorted(
        (row["note"], row["n"]) for row in fan.values("note").annotate(n=Count("id"))
    ) == sorted(notes.items())
    assert [o.pk for o in fan.distinct()] == [o.pk for o in by_id]


def test_or_and_of_routed_querysets() -> None:
    orders = [Order.objects.create() for _ in range(12)]
    a = next(o for o in orders)
    b = next(o for o in orders if shard_of(o) != shard_of(a))
    both = Order.objects.filter(pk=a.pk) | Order.objects.filter(pk=b.pk)
    assert sorted(o.pk for o in both) == sorted([a.pk, b.pk])
    neither = Order.objects.filter(pk=a.pk) & Order.objects.filter(pk=b.pk)
    assert list(neither) == []
