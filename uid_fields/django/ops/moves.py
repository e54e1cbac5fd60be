"""``manage.py uid_fields move-shards``: the Django side of ``uid_fields.moves``.

Each sharded model of a map (and each model that lives with a sharded parent) becomes a
``RowStore`` over its base manager: rows are read with ``values_list`` in primary-key
order and written with raw inserts and ``bulk_update``, so field conversions are Django's
own on both sides; rows are inserted raw (as ``loaddata`` does), so ``auto_now`` fields
keep the source's values. The writes are deliberate copies onto a database the ids may
not name yet, so they run inside ``allow_off_shard_writes()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from django.apps import apps
from django.db import IntegrityError, connections, models, transaction

from ...ops.moves import MovedTable, Row, ShardMove
from ...placement import allow_off_shard_writes
from ..compat import raw_delete, raw_insert, where_sql
from ..connections.replicas import read_from_primary
from ..fields import UidField
from ..routing import parent_link, sharded_pk

__all__ = ["ModelRows", "map_models", "shard_move"]


class ModelRows:
    """A model's rows on any database, as tuples of column values (primary key first)."""

    integrity_error = IntegrityError

    def __init__(self, model: type[models.Model], route: models.Field[Any, Any]) -> None:
        self.model = model
        self.label = model._meta.label
        meta = model._meta
        assert meta.pk is not None
        fields = [meta.pk, *(f for f in meta.concrete_fields if not f.primary_key)]
        self.attnames = [f.attname for f in fields]
        self.names = [f.name for f in fields[1:]]
        self.route_index = self.attnames.index(route.attname)
        self._table = meta.db_table
        self._column = str(route.column)
        self.table_name, self.route_column = self._table, self._column

    def vendor(self, database: str) -> str:
        return str(connections[database].vendor)

    def run(self, database: str, statements: Sequence[str]) -> list[Row]:
        """The fence's SQL, in one transaction, without parameters (``%`` stays as is)."""
        rows: list[Row] = []
        with transaction.atomic(using=database), connections[database].cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
                rows = [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        return rows

    def column_sql(self, database: str) -> str:
        quote = connections[database].ops.quote_name
        return f"{quote(self._table)}.{quote(self._column)}"

    def _rows(self, database: str, where: str | None) -> models.QuerySet[Any]:
        rows = self.model._base_manager.using(database)
        return where_sql(rows, where) if where else rows

    def read(
        self, database: str, *, after: Any, upto: Any, limit: int, where: str | None
    ) -> list[Row]:
        rows = self._rows(database, where)
        if after is not None:
            rows = rows.filter(pk__gt=after)
        if upto is not None:
            rows = rows.filter(pk__lte=upto)
        with read_from_primary():  # a replica's lag would make the copy miss rows
            return list(rows.order_by("pk").values_list(*self.attnames)[:limit])

    def count(self, database: str, where: str | None) -> int:
        with read_from_primary():
            return self._rows(database, where).count()

    def writing(self, database: str) -> AbstractContextManager[Any]:
        return transaction.atomic(using=database)

    def _objects(self, rows: Sequence[Row]) -> list[models.Model]:
        return [self.model(**dict(zip(self.attnames, row, strict=True))) for row in rows]

    def insert(self, database: str, rows: Sequence[Row]) -> None:
        """A raw insert, as ``loaddata`` makes: the values as read, without ``pre_save``
        (which would restamp ``auto_now`` fields and fill ids), in the backend's batches."""
        objs = self._objects(rows)
        fields = list(self.model._meta.concrete_fields)
        size = max(connections[database].ops.bulk_batch_size(fields, objs) or len(objs), 1)
        manager = self.model._base_manager
        with allow_off_shard_writes():
            for start in range(0, len(objs), size):
                raw_insert(manager, objs[start : start + size], fields, database)

    def update(self, database: str, rows: Sequence[Row]) -> None:
        if self.names:
            with allow_off_shard_writes():
                self.model._base_manager.using(database).bulk_update(
                    self._objects(rows), self.names
                )

    def delete(self, database: str, keys: Sequence[Any]) -> None:
        """A raw DELETE: no ``pre_delete``/``post_delete`` signals and no cascade. The
        rows deleted are copies (their twin lives on the other database), and a signal
        handler that removes a stored file would remove the twin's too; children are
        deleted first by the move itself."""
        rows = self.model._base_manager.using(database).filter(pk__in=list(keys))
        raw_delete(rows, database)


def map_models(shards: str) -> list[MovedTable]:
    """The tables a move of map ``shards`` carries, parents before children."""
    found: dict[type[models.Model], MovedTable] = {}
    for model in apps.get_models():
        field = sharded_pk(model)
        if field is not None and field.shards_name == shards:
            found[model] = MovedTable(ModelRows(model, field), field.placement, field.layout)
    for model in apps.get_models():
        link = parent_link(model)
        if link is not None and link.related_model in found:
            parent, own = sharded_pk(link.related_model), model._meta.pk
            assert parent is not None and isinstance(own, UidField)  # as parent_link() found
            found[model] = MovedTable(ModelRows(model, link), parent.placement, own.layout)
    _warn_of_link_tables(found)
    return [found[m] for m in _parents_first(list(found))]


def _warn_of_link_tables(moved: dict[type[models.Model], MovedTable]) -> None:
    """Django's table of a many-to-many relation inside a family lives with its source
    rows, but its ids come from each database's own sequence: the same id names other
    links on the target, so a move cannot carry its rows by id. Said, not hidden."""
    for model in apps.get_models(include_auto_created=True):
        link = parent_link(model) if model._meta.auto_created else None
        if link is not None and link.related_model in moved:
            warnings.warn(
                f"{model._meta.label} (a many-to-many table of {link.related_model._meta.label}) "
                "is not carried by a shard move: its ids come from each database's own "
                "sequence. Declare the relation through= a model of the family with a uid "
                "id (ShardedBigIntField(shard_key=...)), which moves carry.",
                RuntimeWarning,
                stacklevel=3,
            )


def _parents_first(chosen: list[type[models.Model]]) -> list[type[models.Model]]:
    """``chosen`` ordered so each model comes after the models its foreign keys name."""
    ordered: list[type[models.Model]] = []
    visiting: set[type[models.Model]] = set()

    def visit(model: type[models.Model]) -> None:
        if model in ordered or model in visiting:
            return  # placed, or a cycle: its order among the cycle does not matter
        visiting.add(model)
        for field in model._meta.concrete_fields:
            target = field.related_model if field.is_relation else None
            if target is not None and target is not model and target in chosen:
                visit(target)
        visiting.discard(model)
        ordered.append(model)

    for model in chosen:
        visit(model)
    return ordered


def shard_move(
    shards: str,
    *,
    source: str,
    target: str,
    low: int | None = None,
    high: int | None = None,
    state: str | Path | None = None,
    **options: Any,
) -> ShardMove:
    """A ``ShardMove`` of logical shards ``low:high`` (default: all of the source's) of
    map ``shards`` (settings ``SHARDS``) over every model that map places."""
    if target not in connections.settings:
        raise ValueError(f"{target!r} is not a database in DATABASES")
    tables = map_models(shards)
    if not tables:
        raise ValueError(f"no model is sharded by the map {shards!r}")
    options.setdefault("map_name", shards)
    return ShardMove(
        tables, source=source, target=target, low=low, high=high, state=state, **options
    )
