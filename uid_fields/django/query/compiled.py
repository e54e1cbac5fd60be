"""A model query compiled once for every shard of one backend, its models built only for
the rows a fan-out's page keeps (Django before 6.1, whose ``ModelIterable`` loop this
repeats; ``compat.PAGES_BUILT_ONCE``)."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections, models

from ..compat import PAGES_BUILT_ONCE, known_related_objects, related_populators

__all__ = ["CompiledSelect"]


class CompiledSelect:
    """A model query's SQL compiled once, for every database of one backend: run it
    raw on each (``fetch``), then build model instances of only the rows kept
    (``models``), as ``ModelIterable`` would for each row's own database.

    ``ModelIterable`` compiles the query on every database it reads and builds every
    row it fetches; a fan-out's page of 20 over 8 shards would compile 8 times and
    build 160 models to keep 20. The compiler's ``select``/``klass_info`` say where
    the model's fields, the ``select_related`` rows and the annotations sit in a row.
    """

    def __init__(self, queryset: models.QuerySet[Any], compiler: Any, sql: str, params: Any):
        self.queryset = queryset
        self.compiler = compiler
        self.sql = sql
        self.params = tuple(params)
        info = compiler.klass_info
        fields = info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [f[0].target.attname for f in compiler.select[self.start : self.end]]

    @classmethod
    def of(cls, queryset: models.QuerySet[Any], alias: str) -> CompiledSelect | None:
        """The query compiled for ``alias``'s backend; None when it needs no database
        (an empty ``pk__in``, ``none()``) or selects no model, and on a Django whose
        ``ModelIterable`` loop is not the one repeated here (6.1's fetch modes)."""
        if not PAGES_BUILT_ONCE:
            return None
        compiler = queryset.query.get_compiler(using=alias)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:
            return None
        if not compiler.klass_info:
            return None
        return cls(queryset, compiler, sql, params)

    def position(self, attname: str) -> int | None:
        """Where the model's field ``attname`` sits in a row (None: not selected)."""
        for index, name in enumerate(self.init_list, self.start):
            if name == attname:
                return index
        return None

    def fetch(self, alias: str) -> list[tuple[Any, ...]]:
        """The rows of ``alias``'s database, converted as Django converts them, on this
        thread's connection to it."""
        with connections[alias].cursor() as cursor:
            cursor.execute(self.sql, self.params)
            return self.converted(cursor.fetchall())

    def converted(self, rows: list[Any]) -> list[tuple[Any, ...]]:
        """Rows as the driver returned them, converted as Django converts them."""
        compiler = self.compiler
        if compiler.has_extra_select:
            rows = [row[: compiler.col_count] for row in rows]
        return list(compiler.results_iter(results=[rows], tuple_expected=True))

    def models(self, rows: Iterable[tuple[str, tuple[Any, ...]]]) -> list[models.Model]:
        """Model instances of ``(database, row)`` pairs: ``ModelIterable``'s loop, with
        the database of each row rather than one for all."""
        compiler, queryset = self.compiler, self.queryset
        info, select = compiler.klass_info, compiler.select
        model_cls = info["model"]
        annotations = compiler.annotation_col_map
        populators: dict[str, list[Any]] = {}
        known = [
            (
                field,
                objects,
                operator.attrgetter(
                    *[
                        field.attname
                        if source == "self"
                        else queryset.model._meta.get_field(source).attname
                        for source in field.from_fields
                    ]
                ),
            )
            for field, objects in known_related_objects(queryset).items()
        ]
        built = []
        for db, row in rows:
            obj = model_cls.from_db(db, self.init_list, row[self.start : self.end])
            if db not in populators:
                populators[db] = related_populators(info, select, db)
            for populator in populators[db]:
                populator.populate(row, obj)
            for name, column in (annotations or {}).items():
                setattr(obj, name, row[column])
            for field, objects, key_of in known:
                if not field.is_cached(obj):
                    found = objects.get(key_of(obj))
                    if found is not None:
                        setattr(obj, field.name, found)
            built.append(obj)
        return built
