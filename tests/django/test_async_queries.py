"""Django's async queryset methods on sharded models (docs/async.md): each runs the
routed sync query in a thread (``sync_to_async``), so it reads the shard the id names or
merges every shard, as the sync method does."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connections
from django.test.utils import CaptureQueriesContext

from .testapp.models import Order

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_aget_acreate_acount_and_async_iteration_route_by_id() -> None:
    async def scenario() -> None:
        made = [await Order.objects.acreate(note=f"async {i}") for i in range(12)]
        assert len({order._state.db for order in made}) > 1  # spread over the shards
        for order in made:  # each is found on the database it was written to
            found = await Order.objects.aget(pk=order.pk)
            assert found.note == order.note and found._state.db == order._state.db
        first = made[0]
        assert await Order.objects.on_all_shards().acount() == 12
        ids = [o.pk async for o in Order.objects.on_all_shards().order_by("-id")[:5]]
        assert ids == sorted((o.pk for o in made), reverse=True)[:5]
        assert await Order.objects.filter(pk=first.pk).aexists()
        latest = await Order.objects.on_all_shards().alatest("id")
        assert latest.pk == max(o.pk for o in made)

    async_to_sync(scenario)()


def test_aget_runs_one_query_on_one_shard() -> None:
    order = Order.objects.create(note="one")
    alias = order._state.db
    assert alias is not None

    async def read() -> Order:
        return await Order.objects.aget(pk=order.pk)

    with CaptureQueriesContext(connections[alias]) as on_shard:
        found = async_to_sync(read)()
    assert found.pk == order.pk and len(on_shard.captured_queries) == 1


def test_aiterator_and_async_for_over_every_shard_merge_in_id_order() -> None:
    made = [Order.objects.create(note=f"it {i}") for i in range(15)]
    assert len({order._state.db for order in made}) > 1

    async def scenario() -> None:
        everyone = Order.objects.on_all_shards()
        ids = [o.pk async for o in everyone.order_by("id").aiterator(chunk_size=4)]
        assert ids == sorted(o.pk for o in made)
        newest = [o.pk async for o in everyone.order_by("-id").aiterator()]
        assert newest == sorted((o.pk for o in made), reverse=True)
        notes = [o.note async for o in everyone.order_by("-id")[3:8]]
        by_id = {o.pk: o.note for o in made}
        assert notes == [by_id[pk] for pk in sorted(by_id, reverse=True)[3:8]]
        assert await everyone.filter(note__startswith="it 1").acount() == 6
        assert [pk async for pk in everyone.order_by("id").values_list("pk", flat=True)] == (
            sorted(by_id)
        )
        assert await everyone.acontains(made[-1])
        assert (await everyone.order_by("id").afirst()).pk == min(by_id)  # type: ignore[union-attr]

    async_to_sync(scenario)()
