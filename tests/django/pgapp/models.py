"""PostgreSQL-only models: ids made by the database's next_id function."""

from __future__ import annotations

from django.db import models

from uid_fields.django import ShardedBigIntField, ShardedManager


class DbPhoto(models.Model):
    id = ShardedBigIntField(
        primary_key=True,
        generator="photos",
        shards="main",
        shard_key="owner_id",
        database_default=True,
    )
    owner_id = models.BigIntegerField()

    objects = ShardedManager()
