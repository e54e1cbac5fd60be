"""Pictures (Instagram ids, keyed by owner) and their notes (routed by the picture)."""

from __future__ import annotations

from django.db import models

from uid_fields.django import ShardedBigIntField, ShardedManager, SnowflakeField


class Pic(models.Model):
    id = ShardedBigIntField(primary_key=True, generator="pics", shards="pics", shard_key="owner_id")
    owner_id = models.BigIntegerField()
    caption = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class PicNote(models.Model):
    id = SnowflakeField(primary_key=True)
    pic = models.ForeignKey(Pic, on_delete=models.CASCADE, related_name="notes")
    text = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()
