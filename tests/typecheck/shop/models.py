"""Models as a user declares them, with ``IdParts`` so checkers know ``*_parts``."""

from __future__ import annotations

from django.db import models

from uid_fields import IdParts, LocalityParts, SnowflakeParts
from uid_fields.django import LocalityUUIDField, ShardedBigIntField, ShardedManager, SnowflakeField


class Customer(models.Model):
    id = SnowflakeField(primary_key=True, shards="main")
    id_parts = IdParts(SnowflakeParts)
    name = models.CharField(max_length=100)

    objects = ShardedManager()


class Order(models.Model):
    id = ShardedBigIntField(
        primary_key=True, generator="orders", shards="main", shard_key="customer"
    )
    id_parts = IdParts(SnowflakeParts)
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE)

    objects = ShardedManager()


class Visit(models.Model):
    id = LocalityUUIDField(primary_key=True, generator="events")
    id_parts = IdParts(LocalityParts)
