"""Fixtures of sharded models: every row dumped from, and loaded onto, its own shard.

Django's ``dumpdata`` reads one database (``default``, where sharded tables are empty)
and ``loaddata`` writes every row to one database (``--database``), where the rows of the
other shards do not belong; the ``pre_save`` check refuses those writes. These two
functions, behind ``manage.py uid_fields dumpdata`` / ``loaddata``, read and write each
row where its id (or its parent's) says, and leave ordinary models to ``--database``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core import serializers
from django.db import DEFAULT_DB_ALIAS, models, transaction

from ..routing import database_for_instance, parent_link, sharded_pk

__all__ = ["dump", "load", "models_of", "shard_aliases_of"]


def shard_aliases_of(model: type[models.Model]) -> tuple[str, ...] | None:
    """The databases rows of ``model`` live on, or None for an ordinary model."""
    field = sharded_pk(model)
    if field is None:
        link = parent_link(model)
        field = sharded_pk(link.related_model) if link is not None else None
    if field is None:
        return None
    return field.placement.databases


def models_of(labels: Sequence[str]) -> list[type[models.Model]]:
    """Models named by ``app_label`` or ``app_label.Model`` labels (all models if none)."""
    if not labels:
        return [m for m in apps.get_models() if m._meta.managed]
    found: list[type[models.Model]] = []
    for label in labels:
        if "." in label:
            found.append(apps.get_model(label))
        else:
            found.extend(apps.get_app_config(label).get_models())
    return found


def _rows(models_: Iterable[type[models.Model]], database: str) -> Iterator[models.Model]:
    for model in models_:
        aliases = shard_aliases_of(model) or (database,)
        manager = model._base_manager
        for alias in aliases:
            yield from manager.using(alias).order_by(model._meta.pk.name).iterator()


def dump(
    labels: Sequence[str] = (),
    *,
    fmt: str = "json",
    indent: int | None = None,
    database: str = DEFAULT_DB_ALIAS,
) -> str:
    """The rows of the named models, sharded ones read from every shard, serialised."""
    ordered = serializers.sort_dependencies(
        [(apps.get_app_config(m._meta.app_label), [m]) for m in models_of(labels)]
    )
    return str(serializers.serialize(fmt, _rows(ordered, database), indent=indent))


def load(paths: Sequence[str | Path], *, database: str = DEFAULT_DB_ALIAS) -> dict[str, int]:
    """Load fixture files, each row of a sharded model onto its own shard.

    All rows are written inside one transaction per database, committed only when every
    row of every file was saved. Returns the number of rows per database.
    """
    counts: dict[str, int] = {}
    with ExitStack() as stack:
        opened: set[str] = set()
        for path in paths:
            fixture = Path(path)
            fmt = fixture.suffix.lstrip(".") or "json"
            with fixture.open() as stream:
                objects = list(serializers.deserialize(fmt, stream, handle_forward_references=True))
            for deserialized in objects:
                obj: Any = deserialized.object
                alias = (
                    database_for_instance(obj)
                    if shard_aliases_of(type(obj)) is not None
                    else database
                )
                if alias not in opened:
                    stack.enter_context(transaction.atomic(using=alias))
                    opened.add(alias)
                deserialized.save(using=alias)
                counts[alias] = counts.get(alias, 0) + 1
    return counts
