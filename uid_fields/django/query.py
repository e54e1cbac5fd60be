"""A QuerySet that routes by id and fans out only when asked.

``filter(pk=…)``, ``filter(pk__in=…)`` and the shard key narrow a query to the shards
that can hold its rows; ``on_all_shards()`` fans out on purpose. A fanned-out query is
run once per shard (with ``[:n]`` pushed down to each) and merged in its ordering, by
default the id, which for these ids is creation time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import IntegrityError, models, transaction
from django.db.models import Count, Max, Min, Sum
from django.db.models.query import (
    FlatValuesListIterable,
    ModelIterable,
    NamedValuesListIterable,
    ValuesIterable,
    ValuesListIterable,
)

from .fields import UidField
from .routing import database_for_instance, sharded_pk

__all__ = ["ShardedManager", "ShardedQuerySet"]

_ROUTING_LOOKUPS = {"": "exact", "exact": "exact", "in": "in"}


class ShardedQuerySet(models.QuerySet):  # type: ignore[type-arg]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shard_aliases: tuple[str, ...] | None = None

    def _clone(self) -> ShardedQuerySet:
        clone: ShardedQuerySet = super()._clone()
        clone._shard_aliases = self._shard_aliases
        return clone

    # -- routing -------------------------------------------------------------------------
    @property
    def _sharded_field(self) -> UidField | None:
        return sharded_pk(self.model)

    @property
    def db(self) -> str:
        if self._db is None and self._shard_aliases is not None and len(self._shard_aliases) == 1:
            return self._shard_aliases[0]
        return super().db

    @property
    def shard_aliases(self) -> tuple[str, ...]:
        """The databases this query will read."""
        if self._db is not None:
            return (self._db,)
        if self._shard_aliases is not None:
            return self._shard_aliases
        return (self.db,)

    def _is_fanout(self) -> bool:
        return self._db is None and self._shard_aliases is not None and len(self._shard_aliases) > 1

    def on_all_shards(self) -> ShardedQuerySet:
        """Run this query on every shard of the model and merge the results."""
        clone = self._chain()
        field = self._sharded_field
        if field is None or field.shard_map is None:
            raise TypeError(f"{self.model.__name__} is not sharded by a uid_fields primary key")
        if clone._shard_aliases is None:
            clone._shard_aliases = field.shard_map.databases
        return clone

    def _filter_or_exclude_inplace(self, negate: bool, args: Any, kwargs: Any) -> None:
        kwargs = {  # one-shot iterators would be used up before routing reads them
            k: (_values(v, "in") or []) if k.endswith("__in") and _is_id_list(v) else v
            for k, v in kwargs.items()
        }
        super()._filter_or_exclude_inplace(negate, args, kwargs)
        if negate or self._db is not None:
            return
        aliases = self._aliases_for(kwargs)
        if aliases is not None:
            self._narrow(aliases)

    def _aliases_for(self, kwargs: dict[str, Any]) -> set[str] | None:
        field = self._sharded_field
        if field is None or field.shard_map is None:
            return None
        shard_map = field.shard_map
        pk_names = {"pk", field.name, field.attname}
        key_names: set[str] = set()
        if field.shard_key:
            key_field = field.shard_key_field()
            key_names = {key_field.name, key_field.attname}
        found: set[str] | None = None
        for lookup, value in kwargs.items():
            base, _, rest = lookup.partition("__")
            kind = _ROUTING_LOOKUPS.get(rest)
            if kind is None:
                continue
            if base in pk_names:
                values = _values(value, kind)
                if values is None:
                    continue
                aliases = set()
                for item in values:
                    with suppress(TypeError, ValueError):  # an id no shard can hold matches no row
                        aliases.add(shard_map.database_for(_plain(item)))
            elif base in key_names and kind == "exact":
                try:
                    logical = field.logical_shard_for_key(value)
                except (TypeError, ValueError):
                    continue  # a key no shard can be picked by: let the query fail or fan out
                if logical is None:
                    continue
                aliases = {shard_map.database(logical)}
            else:
                continue
            found = aliases if found is None else found & aliases
        return found

    def _narrow(self, aliases: set[str]) -> None:
        field = self._sharded_field
        assert field is not None and field.shard_map is not None
        current = self._shard_aliases or field.shard_map.databases
        kept = tuple(a for a in current if a in aliases)
        if not kept:
            self.query.set_empty()
            kept = current[:1]
        self._shard_aliases = kept

    def _for_alias(self, alias: str, *, order_by_pk: bool = False) -> ShardedQuerySet:
        """This query on one shard, with ``[a:b]`` pushed down as ``[:b]``."""
        clone = self._chain()
        clone._shard_aliases = None
        clone._db = alias
        high = self.query.high_mark
        clone.query.clear_limits()
        if order_by_pk:
            clone = clone.order_by("pk")
        if high is not None:
            clone.query.set_limits(0, high)
        return clone

    # -- evaluation ----------------------------------------------------------------------
    def _ordering(self) -> list[str]:
        query = self.query
        ordering = list(
            query.order_by or (self.model._meta.ordering if query.default_ordering else [])
        )
        names = [o for o in ordering if isinstance(o, str)] if ordering else ["pk"]
        if not query.standard_ordering:  # reverse(), as last() uses
            names = [n[1:] if n.startswith("-") else f"-{n}" for n in names]
        return names

    def _fanout_results(self) -> list[Any]:
        ordering = self._ordering()
        explicit = bool(self.query.order_by) or bool(
            self.model._meta.ordering and self.query.default_ordering
        )
        rows: list[Any] = []
        for alias in self._shard_aliases or ():
            rows.extend(self._for_alias(alias, order_by_pk=not explicit))
        rows = _merge(rows, ordering, self)
        low, high = self.query.low_mark, self.query.high_mark
        return rows[low:high]

    def _fetch_all(self) -> None:
        if self._result_cache is None and self._is_fanout():
            self._result_cache = self._fanout_results()
        super()._fetch_all()

    def iterator(self, chunk_size: int | None = None) -> Iterator[Any]:
        if self._is_fanout():
            return iter(self._fanout_results())
        return super().iterator(chunk_size=chunk_size)

    def count(self) -> int:
        if not self._is_fanout():
            return super().count()
        if self.query.low_mark or self.query.high_mark is not None:
            return len(self._fanout_results())
        return sum(self._for_alias(a).count() for a in self._shard_aliases or ())

    def exists(self) -> bool:
        if not self._is_fanout():
            return super().exists()
        return any(self._for_alias(a).exists() for a in self._shard_aliases or ())

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if not self._is_fanout():
            return super().aggregate(*args, **kwargs)
        for arg in args:
            kwargs[arg.default_alias] = arg
        combine = {Count: _sum, Sum: _sum, Min: min, Max: max}
        for name, expression in kwargs.items():
            if type(expression) not in combine:
                raise NotImplementedError(
                    f"{name}: only Count, Sum, Min and Max combine across shards; run "
                    "other aggregates per shard with .using(alias)"
                )
        results = [self._for_alias(a).aggregate(**kwargs) for a in self._shard_aliases or ()]
        return {
            name: _combine(combine[type(expr)], [r[name] for r in results])
            for name, expr in kwargs.items()
        }

    def update(self, **kwargs: Any) -> int:
        if not self._is_fanout():
            return super().update(**kwargs)
        return sum(self._for_alias(a).update(**kwargs) for a in self._shard_aliases or ())

    def delete(self) -> tuple[int, dict[str, int]]:
        if not self._is_fanout():
            return super().delete()
        total, per_model = 0, dict[str, int]()
        for alias in self._shard_aliases or ():
            count, detail = self._for_alias(alias).delete()
            total += count
            for label, n in detail.items():
                per_model[label] = per_model.get(label, 0) + n
        return total, per_model

    def in_bulk(
        self, id_list: Iterable[Any] | None = None, *, field_name: str = "pk"
    ) -> dict[Any, Any]:
        field = self._sharded_field
        is_pk = field is not None and field_name in ("pk", field.name)
        if self._db is not None or field is None or field.shard_map is None or not is_pk:
            return super().in_bulk(id_list, field_name=field_name)
        if id_list is None:
            result: dict[Any, Any] = {}
            for alias in self.on_all_shards().shard_aliases:
                result.update(
                    models.QuerySet.in_bulk(self._for_alias(alias), field_name=field_name)
                )
            return result
        groups: dict[str, list[Any]] = {}
        for value in id_list:
            try:
                groups.setdefault(field.shard_map.database_for(_plain(value)), []).append(value)
            except (TypeError, ValueError):
                continue
        result = {}
        for alias, ids in groups.items():
            result.update(
                models.QuerySet.in_bulk(self._for_alias(alias), ids, field_name=field_name)
            )
        return result

    # -- writes --------------------------------------------------------------------------
    def _alias_for_new(self, obj: models.Model) -> str:
        if self._db is not None:
            return self._db
        if self._sharded_field is None:
            return self.db
        return database_for_instance(obj)

    def create(self, **kwargs: Any) -> Any:
        obj = self.model(**kwargs)
        self._for_write = True
        obj.save(force_insert=True, using=self._alias_for_new(obj))
        return obj

    def _lookup_scope(self, kwargs: dict[str, Any]) -> ShardedQuerySet:
        """Where to look for a row matching ``kwargs``: its shard, or every shard."""
        if self._db is not None or self._sharded_field is None:
            return self
        if self._shard_aliases is not None or self._aliases_for(kwargs) is not None:
            return self
        return self.on_all_shards()

    def get_or_create(self, defaults: Any = None, **kwargs: Any) -> tuple[Any, bool]:
        if self._sharded_field is None:
            return super().get_or_create(defaults, **kwargs)
        self._for_write = True
        try:
            return self._lookup_scope(kwargs).get(**kwargs), False
        except self.model.DoesNotExist:
            pass
        params = self._extract_model_params(defaults, **kwargs)
        params = {k: v() if callable(v) else v for k, v in params.items()}
        obj = self.model(**params)
        alias = self._alias_for_new(obj)
        try:
            with transaction.atomic(using=alias):
                obj.save(force_insert=True, using=alias)
        except IntegrityError:
            try:
                return self._for_alias(alias).get(**kwargs), False
            except self.model.DoesNotExist:
                pass
            raise
        return obj, True

    def update_or_create(
        self, defaults: Any = None, create_defaults: Any = None, **kwargs: Any
    ) -> tuple[Any, bool]:
        if self._sharded_field is None:
            extra = {} if create_defaults is None else {"create_defaults": create_defaults}
            return super().update_or_create(defaults, **extra, **kwargs)
        defaults = defaults or {}
        try:
            found = self._lookup_scope(kwargs).get(**kwargs)
        except self.model.DoesNotExist:
            return self.get_or_create(
                create_defaults if create_defaults is not None else defaults, **kwargs
            )
        alias = found._state.db
        with transaction.atomic(using=alias):
            obj = self._for_alias(alias).select_for_update().get(pk=found.pk)
            for name, value in defaults.items():
                setattr(obj, name, value() if callable(value) else value)
            obj.save(using=alias)
        return obj, False

    def bulk_create(self, objs: Iterable[Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Give every object its id, then insert one batch per shard."""
        objs = list(objs)
        field = self._sharded_field
        if field is None or self._db is not None:
            _fill_ids(objs)
            return super().bulk_create(objs, *args, **kwargs)
        _fill_ids(objs)
        groups: dict[str, list[Any]] = {}
        for obj in objs:
            groups.setdefault(database_for_instance(obj), []).append(obj)
        for alias, group in groups.items():
            if field.database_default:
                _fetch_database_ids(field, alias, group)
            models.QuerySet.bulk_create(self._for_alias(alias), group, *args, **kwargs)
        return objs


def _fill_ids(objs: Sequence[models.Model]) -> None:
    """Ids for objects that have none, fetched in one batch where the generator allows."""
    if not objs:
        return
    field = type(objs[0])._meta.pk
    if not isinstance(field, UidField) or field.database_default:
        return
    missing = [o for o in objs if getattr(o, field.attname) is None]
    if field.shard_key:
        for obj in missing:
            field.fill(obj)
        return
    for obj, value in zip(missing, field.generate_many(len(missing)), strict=True):
        setattr(obj, field.attname, value)


def _fetch_database_ids(field: UidField, alias: str, objs: list[models.Model]) -> None:
    """Ids for database-made keys in one round trip, so bulk inserts can return them."""
    from django.db import connections

    from .fields import _is_db_default

    missing = [o for o in objs if _is_db_default(getattr(o, field.attname))]
    if not missing:
        return
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT {field.db_function}() FROM generate_series(1, %s)", [len(missing)])
        ids = sorted(row[0] for row in cursor.fetchall())
    for obj, value in zip(missing, ids, strict=True):
        setattr(obj, field.attname, value)


def _plain(value: Any) -> Any:
    return value.pk if isinstance(value, models.Model) else value


def _is_id_list(value: Any) -> bool:
    """An iterable of ids, not a subquery or a string."""
    return isinstance(value, Iterable) and not isinstance(value, (models.QuerySet, str, bytes))


def _values(value: Any, kind: str) -> list[Any] | None:
    if kind == "exact":
        return [value]
    return list(value) if _is_id_list(value) else None


def _sum(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _combine(combine: Any, values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    if combine is _sum:
        return _sum(values)
    return combine(present) if present else None


def _merge(rows: list[Any], ordering: list[str], qs: ShardedQuerySet) -> list[Any]:
    """Rows of several shards sorted by the query's ordering (stable, multi-key)."""
    getter = _key_getter(qs)
    if getter is None:
        return rows
    meta = qs.model._meta
    for name in reversed(ordering):
        descending = name.startswith("-")
        field_name = name.lstrip("-")
        if "__" in field_name or "." in field_name or field_name == "?":
            return rows
        if field_name != "pk":
            with suppress(FieldDoesNotExist):
                field_name = meta.get_field(field_name).attname
        try:
            rows.sort(key=lambda row, f=field_name: _none_last(getter(row, f)), reverse=descending)
        except (KeyError, AttributeError, IndexError, TypeError, StopIteration):
            return rows
    return rows


def _none_last(value: Any) -> tuple[bool, Any]:
    return (value is None, value)


def _key_getter(qs: ShardedQuerySet) -> Any:
    iterable = qs._iterable_class
    pk_name = qs.model._meta.pk.attname
    if iterable is ModelIterable or iterable is NamedValuesListIterable:
        return lambda row, name: getattr(row, name)
    if iterable is ValuesIterable:
        return lambda row, name: row[
            "pk" if name == "pk" and "pk" in row else (pk_name if name == "pk" else name)
        ]
    if iterable in (ValuesListIterable, FlatValuesListIterable):
        names = list(qs._fields or ())
        flat = iterable is FlatValuesListIterable

        def get(row: Any, name: str) -> Any:
            aliases = {name, pk_name, "pk"} if name in (pk_name, "pk") else {name}
            index = next(i for i, field in enumerate(names) if field in aliases)
            return row if flat else row[index]

        return get
    return None


class ShardedManager(models.Manager.from_queryset(ShardedQuerySet)):
    """The default manager of a sharded model."""
