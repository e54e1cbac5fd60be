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

from ...ops.audit import AuditResult, foreign_condition, foreign_rows
from ...placement import Placement
from ..compat import where_sql
from ..routing import parent_link, sharded_pk

__all__ = ["audit", "audit_model", "audited_models"]


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
    ``app_label.Model``). ``LookupError`` for a label that names no installed app or
    model, or only models that do not live on shards: auditing nothing is no all-clear."""
    chosen = audited_models(labels)
    for model in chosen:
        yield from audit_model(model, **options)


def audited_models(labels: Any = ()) -> list[type[models.Model]]:
    """The models an audit of ``labels`` reads (every model on shards for none)."""
    placed = [model for model in apps.get_models() if placed_by(model) is not None]
    if not labels:
        return placed
    chosen: list[type[models.Model]] = []
    for label in labels:
        if "." in label:
            try:
                model = apps.get_model(label)
            except (LookupError, ValueError):
                raise LookupError(f"no installed model {label!r}") from None
            found = [model] if model in placed else []
        else:
            try:
                apps.get_app_config(label)
            except LookupError:
                raise LookupError(f"no installed app with the label {label!r}") from None
            found = [m for m in placed if m._meta.app_label == label]
        if not found:
            raise LookupError(f"{label!r} has no model whose rows live on shards")
        chosen += [m for m in found if m not in chosen]
    return chosen
