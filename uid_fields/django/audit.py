"""``manage.py uid_fields audit``: rows of sharded models stored off their shard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.apps import apps
from django.db import connections, models

from ..ops.audit import AuditResult, foreign_condition, foreign_ids
from .compat import where_sql
from .routing import sharded_pk

__all__ = ["audit", "audit_model"]


def audit_model(
    model: type[models.Model], *, samples: int = 5, batch: int = 5000
) -> list[AuditResult]:
    """One result per database of a sharded model's map."""
    field = sharded_pk(model)
    if field is None:
        return []
    placement = field.placement
    results = []
    for alias in placement.databases:
        rows = model._base_manager.using(alias)
        quote = connections[alias].ops.quote_name
        column = f"{quote(model._meta.db_table)}.{quote(str(field.column))}"
        condition = foreign_condition(placement, alias, column)
        result = AuditResult(model._meta.label, alias)
        if condition is not None:
            misplaced = where_sql(rows, condition).order_by("pk")
            result.misplaced = misplaced.count()
            result.samples = list(misplaced.values_list("pk", flat=True)[:samples])
        else:
            result.method = "scan"
            ids = rows.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=batch)
            for value in foreign_ids(placement, alias, ids, batch=batch):
                result.misplaced += 1
                if len(result.samples) < samples:
                    result.samples.append(value)
        results.append(result)
    return results


def audit(labels: Any = (), **options: Any) -> Iterator[AuditResult]:
    """Every sharded model (or those named ``app_label`` / ``app_label.Model``)."""
    wanted = set(labels)
    for model in apps.get_models():
        label, app = model._meta.label, model._meta.app_label
        if wanted and label not in wanted and app not in wanted:
            continue
        yield from audit_model(model, **options)
