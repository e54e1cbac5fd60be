from django.db import models

from uid_fields.django import LocalityUUIDField, ShardedManager


class PageView(models.Model):
    id = LocalityUUIDField(primary_key=True, generator="pageviews", shards="shop")
    path = models.CharField(max_length=200)
    customer_id = models.BigIntegerField(null=True, blank=True)

    objects = ShardedManager()
