"""Models of the migrations tests: every one of them sharded."""

from __future__ import annotations

from django.db import models

from uid_fields.django import ShardedManager, SnowflakeField


class Ledger(models.Model):
    id = SnowflakeField(primary_key=True, shards="main")
    note = models.CharField(max_length=100)

    objects = ShardedManager()
