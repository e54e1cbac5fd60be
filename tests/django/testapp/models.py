"""Models of the test project, one per way the fields are used."""

from __future__ import annotations

from django.db import models

from uid_fields.django import (
    LocalityUUIDField,
    ShardedBigIntField,
    ShardedManager,
    SnowflakeField,
    UniqIdField,
)


class Order(models.Model):
    id = SnowflakeField(primary_key=True, shards="main", public_prefix="ord")
    note = models.CharField(max_length=100, blank=True)

    objects = ShardedManager()

    class Meta:
        ordering = ["id"]


class Customer(models.Model):
    id = SnowflakeField(primary_key=True, shards="main", public_prefix="cus")
    name = models.CharField(max_length=100)

    objects = ShardedManager()


class Purchase(models.Model):
    """Co-located with its customer: the shard key is a foreign key to a sharded model."""

    id = ShardedBigIntField(
        primary_key=True,
        generator="photos",
        shards="main",
        shard_key="customer",
        public_prefix="pur",
    )
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="purchases")
    total = models.IntegerField(default=0)

    objects = ShardedManager()


class PurchaseLine(models.Model):
    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="purchase"
    )
    purchase = models.ForeignKey(Purchase, on_delete=models.CASCADE, related_name="lines")
    sku = models.CharField(max_length=20)

    objects = ShardedManager()


class Photo(models.Model):
    """Instagram's case: an owner's photos share a logical shard (owner_id % 8192)."""

    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="owner_id"
    )
    owner_id = models.BigIntegerField()
    caption = models.CharField(max_length=100, blank=True)

    objects = ShardedManager()


class PageView(models.Model):
    id = LocalityUUIDField(primary_key=True, generator="events", shards="main", public_prefix="pv")
    path = models.CharField(max_length=200)

    objects = ShardedManager()


class LegacyRow(models.Model):
    id = SnowflakeField(primary_key=True, generator="legacy", shards="main")
    label = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class PhpRow(models.Model):
    id = UniqIdField(primary_key=True, generator="php", shards="main")
    label = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class Tag(models.Model):
    """Not sharded: lives on default, with a snowflake in a non-key column."""

    ref = SnowflakeField(unique=True)
    name = models.CharField(max_length=50)


class Review(models.Model):
    """Not co-located with its order: a soft reference (no constraint across databases)."""

    id = SnowflakeField(primary_key=True, shards="main")
    order = models.ForeignKey(
        Order, on_delete=models.DO_NOTHING, db_constraint=False, related_name="reviews"
    )
    stars = models.IntegerField(default=5)

    objects = ShardedManager()


class OrderLine(models.Model):
    """A child with a uid id of its own that names no shard: it lives with its order."""

    id = SnowflakeField(primary_key=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="lines")
    sku = models.CharField(max_length=20, blank=True)

    objects = ShardedManager()


class Device(models.Model):
    """Rows placed by a UUID shard key."""

    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="device_uuid"
    )
    device_uuid = models.UUIDField()

    objects = ShardedManager()


class Snap(models.Model):
    """Sharded ids with no shard key: the core picks a database per row."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main")
    label = models.CharField(max_length=20, blank=True)

    objects = ShardedManager()


class Coupon(models.Model):
    """An ordinary model on ``default``, pointed at by sharded rows."""

    code = models.CharField(max_length=20)


class Basket(models.Model):
    """A sharded row with references to ordinary models (no constraint across databases)."""

    id = SnowflakeField(primary_key=True, shards="main")
    coupon = models.ForeignKey(Coupon, null=True, on_delete=models.DO_NOTHING, db_constraint=False)
    created_by = models.ForeignKey(
        "auth.User", null=True, on_delete=models.DO_NOTHING, db_constraint=False
    )
    ref = SnowflakeField(null=True)  # a nullable uid column: None stays NULL

    objects = ShardedManager()


class Note(models.Model):
    """An ordinary model on ``default`` that points at a sharded customer."""

    customer = models.ForeignKey(
        Customer, on_delete=models.DO_NOTHING, db_constraint=False, related_name="notes"
    )
    text = models.CharField(max_length=50)


class Stamp(models.Model):
    """Timestamps Django sets itself on save: a copy of the row must keep the original's."""

    id = SnowflakeField(primary_key=True, shards="main")
    created = models.DateTimeField(auto_now_add=True)
    changed = models.DateTimeField(auto_now=True)

    objects = ShardedManager()


class Ranked(models.Model):
    """Rows placed by ``bucket``, with a nullable rank and mixed-case, accented names: what
    a fan-out merge must order as one database does."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main", shard_key="bucket")
    bucket = models.BigIntegerField()
    rank = models.IntegerField(null=True)
    name = models.CharField(max_length=20)

    objects = ShardedManager()
