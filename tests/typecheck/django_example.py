"""User code of the Django adapter, with the types a checker must infer.

``make typecheck-docs`` runs ``mypy --strict`` (with the django-stubs plugin, reading
``tests.typecheck.django_settings``) and ``pyright`` (no plugin: what an editor sees)
over it; each ``assert_type`` is checked by both. Not run.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import assert_type

from uid_fields import LocalityParts, SnowflakeParts
from uid_fields.django import ShardedManager, ShardedQuerySet, sharded_atomic

from .shop.models import Customer, Order, Visit


def use(alice: Customer, since: datetime) -> None:
    assert_type(Order.objects, ShardedManager[Order])
    order = Order.objects.create(customer=alice)
    assert_type(order, Order)
    assert_type(order.id, int)
    assert_type(order.id_parts, SnowflakeParts)
    assert_type(order.id_parts.shard, int)
    assert_type(order.id_parts.datetime, datetime)
    assert_type(alice.id_parts.worker, int)
    visit = Visit()
    assert_type(visit.id, uuid.UUID)
    assert_type(visit.id_parts, LocalityParts)
    assert_type(visit.id_parts.counter, int)
    assert_type(Order.objects.get(pk=order.id), Order)
    recent = Order.objects.on_all_shards().filter(id__time__gte=since)
    assert_type(recent, ShardedQuerySet[Order])
    assert_type(list(recent), list[Order])
    assert_type(recent.first(), Order | None)
    assert_type(Order.objects.on_all_shards().count(), int)
    with sharded_atomic("shard_0", "shard_1"):
        order.save()
