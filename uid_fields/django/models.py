"""The worker-id lease table that ``uid_fields.django.leases.database_lease`` uses.

The core describes the table once (``uid_fields.leases.database.COLUMNS``); this model
and its migration are Django's spelling of it, held to it by a test.
"""

from __future__ import annotations

from django.db import models

__all__ = ["WorkerLease"]


class WorkerLease(models.Model):
    """One leasable node id: ``(name, node)``, held by ``token`` until ``expires_ms``.

    Rows are created for a name's whole range on first use and never deleted; a free id
    is a row whose ``expires_ms`` (database clock, Unix ms) has passed.
    """

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    name: models.CharField[str, str] = models.CharField(max_length=100)
    node: models.IntegerField[int, int] = models.IntegerField()
    token: models.CharField[str | None, str | None] = models.CharField(
        max_length=200, null=True, blank=True
    )
    expires_ms: models.BigIntegerField[int, int] = models.BigIntegerField(default=0)
    claimed_ms: models.BigIntegerField[int, int] = models.BigIntegerField(default=0)

    class Meta:
        db_table = "uid_fields_worker_lease"
        constraints = [
            models.UniqueConstraint(
                fields=["name", "node"], name="uid_fields_worker_lease_name_node"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}:{self.node}"
