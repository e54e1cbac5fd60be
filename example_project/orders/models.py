from django.db import models

from uid_fields.django import ShardedBigIntField, ShardedManager


class Order(models.Model):
    """Lives on its customer's shard: the customer is the shard key."""

    STATUSES = [("new", "new"), ("paid", "paid"), ("shipped", "shipped")]

    id = ShardedBigIntField(
        primary_key=True, generator="orders", shards="shop", shard_key="customer"
    )
    customer = models.ForeignKey(
        "customers.Customer", on_delete=models.CASCADE, related_name="orders"
    )
    status = models.CharField(max_length=10, choices=STATUSES, default="new")
    total_cents = models.PositiveIntegerField(default=0)
    note = models.CharField(max_length=200, blank=True)
    # Where the order came from and the day it was placed: what the admin's changelist
    # of every shard filters by (a plain field) and drills into (date_hierarchy).
    channel = models.CharField(max_length=10, default="web")
    placed_on = models.DateField(null=True, blank=True)

    objects = ShardedManager()

    def __str__(self) -> str:
        return f"Order {self.pk}"


class OrderLine(models.Model):
    """Lives with its order."""

    id = ShardedBigIntField(primary_key=True, generator="orders", shards="shop", shard_key="order")
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="lines")
    sku = models.CharField(max_length=20)
    quantity = models.PositiveIntegerField(default=1)
    price_cents = models.PositiveIntegerField(default=0)

    objects = ShardedManager()
