from django.db import models

from uid_fields.django import ShardedManager, SnowflakeField


class Customer(models.Model):
    id = SnowflakeField(primary_key=True, shards="shop")
    name = models.CharField(max_length=100)
    email = models.EmailField(blank=True)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name
