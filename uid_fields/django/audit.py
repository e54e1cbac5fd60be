"""``manage.py uid_fields audit``: rows of sharded models stored off their shard.

A sharded model's rows are placed by their id; a follower's (a uid id of its own that
names no shard, and a foreign key to a sharded parent) by its parent's id, so the audit
reads that column on each database of the parent's map.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.apps import apps
from django.db import connections, models

from ..ops.audit import AuditResult, foreign_condition, foreign_rows
from ..placement import Placement
from .compat import where_sql
from .routing import parent_link, sharded_pk

__all__ = ["audit", "audit_model"]


def placed_by(model: type[models.Model]) -> tuple[Placement, models.Field[Any, Any]] | None:
    """The placement that decides where ``model``'s rows live, and the column holding the
    id it reads: the model's own sharded id, or a follower's key to its parent."""
    field = sharded_pk(model)
    if field is not None:
        return field.placement, field
    link = parent_link(model)
    parent = sharded_pk(link.related_model) if link is not None else None
    if link is None or parent is None:
        return None
    return parent.placement, link


def audit_model(
    model: type[models.Model], *, samples: int = 5, batch: int = 5000
) -> list[AuditResult]:
    """One result per database of a sharded (or follower) model's map."""
    placed = placed_by(model)
    if placed is None:
        return []
    placement, field = placed
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
            pairs = rows.order_by("pk").values_list("pk", field.attname)
            for value in foreign_rows(placement, alias, pairs.iterator(chunk_size=batch)):
                result.misplaced += 1
                if len(result.samples) < samples:
                    result.samples.append(value)
        results.append(result)
    return results


def audit(labels: Any = (), **options: Any) -> Iterator[AuditResult]:
    """Every sharded and follower model (or those named ``app_label`` /
    ``app_label.Model``)."""
    wanted = set(labels)
    for model in apps.get_models():
        label, app = model._meta.label, model._meta.app_label
        if wanted and label not in wanted and app not in wanted:
            continue
        yield from audit_model(model, **options)
