"""A QuerySet that routes by id and fans out only when asked.

``filter(pk=…)``, ``filter(pk__in=…)`` and the shard key narrow a query to the shards
that can hold its rows; ``on_all_shards()`` fans out on purpose. A fanned-out query is
run once per shard (with ``[:n]`` pushed down to each) and merged in its ordering, by
default the id, which for these ids is creation time.

This module owns the routing (which shards a query names), the evaluation of a query
over several shards and the manager; where writes go and how they commit lives in
``query_writes``, the mixin ``ShardedQuerySet`` is composed with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, Self, overload

from asgiref.sync import sync_to_async
from django.db import models

from ...errors import ShardRoutingError
from .. import compat
from ..choices import EveryShard
from ..compat import ModelIterable, iterable_class
from ..connections.replicas import read_alias, replica_primaries
from ..connections.transactions import sharded_atomic
from ..fields import UidField
from ..relations.joins import load_hops, sharded_prefetches, split_select_related
from ..relations.relation_filters import refuse_paths, rewrite_filter
from ..routing import colocated, family_keys, parent_link, refuses_unrouted, sharded_pk
from ..unique import unique_lookup_databases, validating_unique
from . import plans, vetting
from .fanout import FanOutPlan, gather, merged_rows, model_page, streamed_rows
from .followers import clean_parent_lookups, parent_databases
from .id_lookups import (
    ROUTING_LOOKUPS,
    filter_shards,
    is_id_list,
    joined_shards,
    plain_value,
    valid_id,
)
from .pages import warn_deep_offset
from .query_writes import ShardedWritesMixin

__all__ = ["ShardedManager", "ShardedQuerySet", "sharded_atomic"]


class PrimaryModelIterable(ModelIterable):
    """Model instances that name their primary in ``_state.db`` even when a replica was
    read: ``save()`` and related managers follow ``_state.db``, and must reach the
    primary. ``select_related`` joins only what lives on the query's database; the rest
    is loaded from its own databases (``uid_fields.django.relations.joins``), per batch of rows."""

    def __iter__(self) -> Iterator[Any]:
        primaries = replica_primaries()
        for obj in self._rows():
            if primaries:
                _to_primary(obj, primaries)
            yield obj

    def _rows(self) -> Iterator[Any]:
        queryset = self.queryset
        joined, hops = split_select_related(queryset, lambda: (queryset.primary_db,))
        if not hops:
            yield from super().__iter__()
            return
        self.queryset = joined
        batch: list[Any] = []
        for obj in super().__iter__():
            batch.append(obj)
            if self.chunked_fetch and len(batch) >= self.chunk_size:
                load_hops(batch, hops)
                yield from batch
                batch = []
        load_hops(batch, hops)
        yield from batch


#: Rows per shard cursor fetch of a fan-out's iterator() (Django's own default).
_CHUNK = 2000


def _next_rows(stream: Iterator[Any], count: int) -> list[Any]:
    return list(islice(stream, count))


def _with_hops(rows: Iterator[Any], hops: Any, chunk_size: int) -> Iterator[Any]:
    """Relations on other databases loaded for each chunk of merged rows."""
    while batch := list(islice(rows, chunk_size)):
        load_hops(batch, hops)
        yield from batch


def _to_primary(obj: models.Model, primaries: dict[str, str], depth: int = 0) -> None:
    primary = primaries.get(obj._state.db or "")
    if primary is None:
        return
    obj._state.db = primary
    if depth < 8:  # rows joined by select_related() came from the same replica
        for related in obj._state.fields_cache.values():
            if isinstance(related, models.Model):
                _to_primary(related, primaries, depth + 1)


if TYPE_CHECKING:  # a default, so ShardedManager() needs no annotation in a model
    from typing_extensions import TypeVar

    _MM = TypeVar("_MM", bound=models.Model, covariant=True, default=models.Model)
else:
    from typing import TypeVar

    _MM = TypeVar("_MM", bound=models.Model, covariant=True)
_M = TypeVar("_M", bound=models.Model, covariant=True)
_N = TypeVar("_N", bound=models.Model)


class ShardedQuerySet(ShardedWritesMixin[_M], models.QuerySet[_M]):
    """A QuerySet that reads the shards its filters name and fans out only when asked.

    ``filter(pk=...)``, ``pk__in``, the shard key (``=``, ``__in``, ``Q`` objects) and a
    whole unique set narrow it to their shards; ``on_all_shards()`` reads every shard and
    merges as one database would; a query that names no shard raises
    ``ShardRoutingError`` instead of reading ``default``. Writes go where each row's id
    says. The default manager of a sharded model is a ``ShardedManager`` of this class.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shard_aliases: tuple[str, ...] | None = None
        self._read_alias: str | None = None  # chosen once for a fan-out's shard query
        compat.set_iterable_class(self, PrimaryModelIterable)
        self._uid_fields_for_choices = False

    def _clone(self) -> ShardedQuerySet:
        clone: ShardedQuerySet = super()._clone()
        clone._shard_aliases = self._shard_aliases
        clone._read_alias = self._read_alias
        clone._uid_fields_for_choices = self._uid_fields_for_choices
        return clone

    @property
    def _pinned(self) -> str | None:
        """The database ``using()`` (or a related manager) pinned this query to."""
        return compat.explicit_database(self)

    def for_choices(self) -> Self:
        """This query, read for a choice list: when it names no shard it reads every
        shard instead of being refused (a select box, a filter form, DRF's browsable
        API; see ``choices``). Its copies keep the flag; a query that names shards is
        routed as before."""
        clone = compat.chained(self)
        clone._uid_fields_for_choices = True
        return clone

    def complex_filter(self, filter_obj: Any) -> Self:
        if isinstance(filter_obj, EveryShard):  # a relation's limit_choices_to, see choices
            return self.filter(filter_obj)
        return super().complex_filter(filter_obj)

    # -- routing -------------------------------------------------------------------------
    @property
    def _sharded_field(self) -> UidField | None:
        return sharded_pk(self.model)

    @property
    def db(self) -> str:
        """The database this query runs on: for a read, one of the shard's replicas when
        it has some and nothing pins the read to the primary (``uid_fields.replicas``)."""
        primary = self.primary_db
        if compat.is_for_write(self):
            return primary
        if self._read_alias is not None:
            return self._read_alias
        return read_alias(primary)

    @property
    def primary_db(self) -> str:
        """The database the rows live on (and writes go to)."""
        if (
            self._pinned is None
            and self._shard_aliases is not None
            and len(self._shard_aliases) == 1
        ):
            return self._shard_aliases[0]
        if self._pinned is None and self.query.is_empty() and self._shard_databases():
            return self._shard_databases()[0]  # none(): no query runs, any shard answers
        return super().db

    def _shard_databases(self) -> tuple[str, ...]:
        """Every database rows of this model may live on (empty for an ordinary model)."""
        field = self._sharded_field
        if field is None:
            link = parent_link(self.model)
            field = sharded_pk(link.related_model) if link is not None else None
        return field.placement.databases if field is not None else ()

    @property
    def shard_aliases(self) -> tuple[str, ...]:
        """The databases this query will read."""
        if self._pinned is not None:
            return (self._pinned,)
        if self._shard_aliases is not None:
            return self._shard_aliases
        return (self.primary_db,)

    def _is_fanout(self) -> bool:
        return (
            self._pinned is None
            and self._shard_aliases is not None
            and len(self._shard_aliases) > 1
        )

    def __or__(self, other: Any) -> ShardedQuerySet:
        combined: ShardedQuerySet = super().__or__(other)
        combined._shard_aliases = joined_shards(self, other, any_of=True)
        return combined

    def __and__(self, other: Any) -> ShardedQuerySet:
        combined: ShardedQuerySet = super().__and__(other)
        combined._shard_aliases = joined_shards(self, other, any_of=False)
        return combined

    def _add_hints(self, **hints: Any) -> None:
        super()._add_hints(**hints)
        instance = hints.get("instance")
        field = self._sharded_field
        if (
            instance is not None
            and field is not None
            and field.shard_map is not None
            and not isinstance(instance, self.model)
            and self._pinned is None
            and self._shard_aliases is None
            and not colocated(self.model, type(instance))
        ):
            # A related manager of a row these rows do not live with: they may be on
            # any shard (its filter may still narrow them to one).
            self._shard_aliases = field.shard_map.databases

    def on_all_shards(self) -> Self:
        """Run this query on every shard of the model and merge the results."""
        clone = compat.chained(self)
        databases = self._shard_databases()
        if not databases:
            raise TypeError(f"{self.model.__name__} is not sharded by a uid_fields primary key")
        if compat.explicit_database(clone) is not None:
            compat.set_explicit_database(
                clone, None
            )  # an explicit fan-out wins over an earlier .using(alias)
            clone._shard_aliases = None
        if clone._shard_aliases is None:
            clone._shard_aliases = databases
        return clone

    def using(self, alias: str | None) -> Self:
        """``using(None)`` of rows on shards is a fan-out, not ``default``.

        Django asks ``_default_manager.using(None)`` for the choices of a foreign key's
        form field, a raw-id widget's label and similar: they list or look up rows of
        every shard (a lookup by id still reads one shard).
        """
        if alias is None and self._pinned is None and self._shard_databases():
            return self.on_all_shards()
        return super().using(alias)

    def raw(
        self, raw_query: Any, params: Any = (), translations: Any = None, using: Any = None
    ) -> Any:
        if using is None and self._pinned is None and self._shard_databases():
            name = self.model.__name__
            raise ShardRoutingError(
                f"raw SQL of {name} runs on one database, and this query names none: run "
                f"it per shard, {name}.objects.using(alias).raw(sql) for each alias in "
                f"{list(self._shard_databases())}"
            )
        return super().raw(raw_query, params, translations, using)

    def _query_databases(self) -> tuple[str, ...]:
        """The database(s) this query's SQL runs on (its JOINs find rows only there)."""
        return (pinned,) if (pinned := self._pinned) is not None else self._shard_databases()

    def _refuse_cross_database(self, items: Iterable[Any], what: str) -> None:
        refuse_paths(self.model, self._query_databases(), items, what)

    def prefetch_related(self, *lookups: Any) -> Self:
        """Forward keys and reverse one-to-ones to rows on other shards are prefetched
        where those rows live (``joins.sharded_prefetches``), never from the first
        row's shard."""
        if lookups == (None,):
            return super().prefetch_related(None)
        return super().prefetch_related(*sharded_prefetches(self.model, lookups))

    def order_by(self, *field_names: Any) -> Self:
        self._refuse_cross_database(field_names, "order_by()")
        return super().order_by(*field_names)

    def distinct(self, *field_names: Any) -> Self:
        self._refuse_cross_database(field_names, "distinct()")
        return super().distinct(*field_names)

    def values(self, *fields: Any, **expressions: Any) -> Any:
        self._refuse_cross_database([*fields, *expressions.values()], "values()")
        return super().values(*fields, **expressions)

    def values_list(self, *fields: Any, flat: bool = False, named: bool = False) -> Any:
        self._refuse_cross_database(fields, "values_list()")
        return super().values_list(*fields, flat=flat, named=named)

    def annotate(self, *args: Any, **kwargs: Any) -> Self:
        self._refuse_cross_database([*args, *kwargs.values()], "annotate()")
        return super().annotate(*args, **kwargs)

    def alias(self, *args: Any, **kwargs: Any) -> Self:
        self._refuse_cross_database([*args, *kwargs.values()], "alias()")
        return super().alias(*args, **kwargs)

    def _filter_or_exclude_inplace(self, negate: bool, args: Any, kwargs: Any) -> None:
        if any(isinstance(arg, EveryShard) for arg in args):
            self._uid_fields_for_choices = self._uid_fields_for_choices or not negate
            args = tuple(
                arg.conditions() if isinstance(arg, EveryShard) else arg
                for arg in args
                if not isinstance(arg, EveryShard) or arg.children
            )
        args, kwargs = rewrite_filter(self.model, self._query_databases(), negate, args, kwargs)
        kwargs, impossible = self._valid_id_lookups(kwargs)
        super()._filter_or_exclude_inplace(negate, args, kwargs)
        if impossible and not negate and self._pinned is None:
            self._narrow(set())  # a malformed id matches no row: DoesNotExist, a 404
            return
        if impossible and not negate:
            compat.match_nothing(self)
        if negate or self._pinned is not None:
            return
        aliases = self._aliases_for(kwargs, args)
        if aliases is None and self._shard_aliases is None:
            # the exact values of a whole unique set (slug=, DRF's slug__exact=): at
            # most one row per shard, on any shard the set can span
            aliases = unique_lookup_databases(self.model, kwargs)
        if aliases is not None:
            self._narrow(aliases)

    def _valid_id_lookups(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Id lookups with malformed ids taken out (they can match no row).

        One-shot iterators are read once here, before Django and routing both need them.
        """
        field = self._sharded_field
        impossible = False
        link = parent_link(self.model) if field is None else None
        if link is not None:  # a follower: its parent's ids route, its own are checked
            kwargs, impossible = clean_parent_lookups(link, kwargs)
            own = self.model._meta.pk
            field = own if isinstance(own, UidField) else None
        names = {"pk", field.name, field.attname} if field is not None else {"pk"}
        clean: dict[str, Any] = {}
        for lookup, value in kwargs.items():
            base, _, rest = lookup.partition("__")
            kind = ROUTING_LOOKUPS.get(rest)
            if kind == "in" and is_id_list(value):
                value = list(value)
            if field is None or base not in names or kind is None:
                clean[lookup] = value
            elif kind == "exact":
                if value is None or isinstance(value, models.Model) or valid_id(field, value):
                    clean[lookup] = value
                else:
                    impossible = True
            elif isinstance(value, list):
                clean[lookup] = [v for v in value if valid_id(field, plain_value(v))]
            else:
                clean[lookup] = value
        return clean, impossible

    def _aliases_for(self, kwargs: dict[str, Any], args: Iterable[Any] = ()) -> set[str] | None:
        """The shards ``filter(*args, **kwargs)`` names (None: it names none)."""
        field = self._sharded_field
        if field is None:
            link = parent_link(self.model)  # a follower is routed by its parent's id
            return None if link is None else parent_databases(link, kwargs)
        if field.shard_map is None:
            return None
        family = {
            name: target
            for key in family_keys(self.model)
            if (target := sharded_pk(key.related_model)) is not None
            for name in (key.name, key.attname)
        }
        found = filter_shards(field, args, kwargs, family)
        return None if found is None else set(found)

    def _narrow(self, aliases: set[str]) -> None:
        current = self._shard_aliases or self._shard_databases()
        assert current, f"{self.model.__name__} does not live on shards"
        kept = tuple(a for a in current if a in aliases)
        if not kept:
            compat.match_nothing(self)
            kept = current[:1]
        self._shard_aliases = kept

    def _for_alias(self, alias: str, *, order_by_pk: bool = False) -> ShardedQuerySet:
        """This query on one shard, with ``[a:b]`` pushed down as ``[:b]``."""
        clone = compat.chained(self)
        clone._shard_aliases = None
        compat.set_explicit_database(clone, alias)
        high = compat.limits(self)[1]
        compat.reslice(clone, None)  # order_by() refuses a sliced query
        if order_by_pk:
            clone = clone.order_by("pk")
        compat.reslice(clone, high)
        return clone

    def _lookup_scope(self, kwargs: dict[str, Any]) -> ShardedQuerySet:
        """Where to look for a row matching ``kwargs``: its shard, or every shard."""
        if self._pinned is not None or not self._shard_databases():
            return self
        if self._shard_aliases is not None or self._aliases_for(kwargs) is not None:
            return self
        return self.on_all_shards()

    # -- evaluation ----------------------------------------------------------------------
    def _refuse_uncombinable(self) -> None:
        """``UnmergeableQueryError`` for a construct not proven to decompose over shards
        (``vetting.refusals``), before any query runs: every fan-out path asks."""
        vetting.vet(self)

    def _fanout_results(self) -> list[Any]:
        self._refuse_uncombinable()
        if plans.planned(self):  # groups that span shards, DISTINCT values: the core merges
            return plans.results(self, self._shard_aliases or ())
        plan = FanOutPlan.of(self)  # an ordering the merge cannot repeat is refused here
        explicit = compat.explicitly_ordered(self)
        aliases = self._shard_aliases or ()
        low, high = compat.limits(self)
        warn_deep_offset(self.model, low, len(aliases))
        # Relations on other databases are loaded once, for the merged page of rows.
        joined, hops = split_select_related(self, lambda: aliases)

        def shard_queries() -> list[ShardedQuerySet]:
            return [joined._for_alias(alias, order_by_pk=not explicit) for alias in aliases]

        page = None
        if self._builds_models() and aliases:
            first = joined._for_alias(aliases[0], order_by_pk=not explicit)
            page = model_page(plan, first, aliases, shard_queries, low, high)
        if page is None:
            page = merged_rows(plan, shard_queries())[low:high]
        else:
            primaries = replica_primaries()
            for obj in page if primaries else ():
                _to_primary(obj, primaries)
        if hops:
            load_hops(page, hops)
        return page

    def _fanout_stream(self, chunk_size: int) -> Iterator[Any]:
        """The fan-out's rows as a stream (``fanout.streamed_rows``): what was refused
        by ``_fanout_results`` is refused here, before any query; an ordering that
        cannot stream (text under a linguistic collation) is merged whole instead."""
        self._refuse_uncombinable()
        if plans.planned(self):
            return iter(plans.results(self, self._shard_aliases or ()))
        plan = FanOutPlan.of(self)
        explicit = compat.explicitly_ordered(self)
        aliases = self._shard_aliases or ()
        joined, hops = split_select_related(self, lambda: aliases)
        shards = [joined._for_alias(alias, order_by_pk=not explicit) for alias in aliases]
        rows = streamed_rows(plan, shards, chunk_size)
        if rows is None:
            return iter(self._fanout_results())
        rows = islice(rows, *compat.limits(self))
        return _with_hops(rows, hops, chunk_size) if hops else rows

    def _builds_models(self) -> bool:
        """Whether this query yields the model's instances the plain way (not values(),
        not another iterable class a caller installed)."""
        return iterable_class(self) is PrimaryModelIterable

    def _per_shard(self, work: Callable[[ShardedQuerySet], Any]) -> list[Any]:
        """``work`` on this query on each of its shards: at the same time when that is
        safe (see ``fanout.gather``), in shard order."""
        shards = [self._for_alias(alias) for alias in self._shard_aliases or ()]
        return gather(shards, work)

    def _implied_fanout(self) -> ShardedQuerySet | None:
        """This query over every shard, when it names none and is flagged for a choice
        list (``for_choices()``: a select box, a filter form, DRF's browsable API; see
        ``choices``) or read by ``validate_unique()`` of this model (``unique``); None
        otherwise, and the query is routed (or refused) as usual."""
        if self._pinned is not None or self._shard_aliases is not None:
            return None
        if not self._shard_databases() or not refuses_unrouted(self.model):
            return None
        implied = self._uid_fields_for_choices or validating_unique(self.model)
        return self.on_all_shards() if implied else None

    def _fetch_all(self) -> None:
        if compat.result_cache(self) is None:
            if self._is_fanout():
                compat.set_result_cache(self, self._fanout_results())
            else:
                implied = self._implied_fanout()
                if implied is not None:
                    compat.set_result_cache(
                        self, list(implied)
                    )  # its prefetches are kept, not redone
        super()._fetch_all()

    def iterator(self, chunk_size: int | None = None) -> Iterator[Any]:
        """Over several shards, a stream: each shard's cursor read ``chunk_size`` rows
        at a time (2000 by default, as Django's), merged in the query's order."""
        if self._is_fanout():
            if chunk_size is not None and chunk_size <= 0:
                raise ValueError("Chunk size must be strictly positive.")
            return self._fanout_stream(chunk_size or _CHUNK)
        implied = self._implied_fanout()
        if implied is not None:
            return implied.iterator(chunk_size=chunk_size)
        return super().iterator(chunk_size=chunk_size)

    async def aiterator(self, chunk_size: int = 2000) -> AsyncIterator[Any]:
        """``iterator()``'s stream over several shards, read a chunk at a time in the
        thread Django runs this request's database work in."""
        if not self._is_fanout() and self._implied_fanout() is None:
            async for row in super().aiterator(chunk_size=chunk_size):
                yield row
            return
        if chunk_size <= 0:
            raise ValueError("Chunk size must be strictly positive.")
        stream = await sync_to_async(self.iterator)(chunk_size)
        try:
            while True:
                rows = await sync_to_async(_next_rows)(stream, chunk_size)
                for row in rows:
                    yield row
                if len(rows) < chunk_size:
                    return
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                await sync_to_async(close)()

    def count(self) -> int:
        if not self._is_fanout():
            implied = self._implied_fanout()
            if implied is not None:
                return implied.count()
            return super().count()
        if self.query.is_sliced:
            return len(self._fanout_results())
        self._refuse_uncombinable()
        if plans.planned(self):
            return len(plans.results(self, self._shard_aliases or ()))
        # each shard's rows (distinct ones too: they differ by their key) are its own
        return sum(self._per_shard(lambda shard: shard.count()))

    def exists(self) -> bool:
        if not self._is_fanout():
            implied = self._implied_fanout()
            if implied is not None:
                return implied.exists()
            return super().exists()
        if self.query.is_sliced:
            return bool(self._fanout_results())
        self._refuse_uncombinable()
        if plans.planned(self):
            return bool(plans.results(self, self._shard_aliases or ()))
        return any(self._per_shard(lambda shard: shard.exists()))

    def aggregate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self._refuse_cross_database([*args, *kwargs.values()], "aggregate()")
        if not self._is_fanout():
            return super().aggregate(*args, **kwargs)
        self._refuse_uncombinable()
        for arg in args:
            kwargs[arg.default_alias] = arg
        return plans.aggregate(self, kwargs, self._shard_aliases or ())

    def in_bulk(
        self, id_list: Iterable[Any] | None = None, *, field_name: str = "pk"
    ) -> dict[Any, Any]:
        field = self._sharded_field
        is_pk = field is not None and field_name in ("pk", field.name)
        if self._pinned is not None or field is None or field.shard_map is None or not is_pk:
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
                groups.setdefault(field.placement.database_of(plain_value(value)), []).append(value)
            except (TypeError, ValueError):
                continue
        result = {}
        for alias, ids in groups.items():
            result.update(
                models.QuerySet.in_bulk(self._for_alias(alias), ids, field_name=field_name)
            )
        return result


if TYPE_CHECKING:
    # What Manager.from_queryset(ShardedQuerySet) makes, spelled out for type checkers
    # (which do not run from_queryset): the queryset's own methods, typed by the model.
    class _ShardedManagerBase(models.Manager[_MM]):
        def get_queryset(self) -> ShardedQuerySet[_MM]: ...
        def on_all_shards(self) -> ShardedQuerySet[_MM]: ...
        def for_choices(self) -> ShardedQuerySet[_MM]: ...
        def using(self, alias: str | None) -> ShardedQuerySet[_MM]: ...
        def all(self) -> ShardedQuerySet[_MM]: ...
        def filter(self, *args: Any, **kwargs: Any) -> ShardedQuerySet[_MM]: ...
        def exclude(self, *args: Any, **kwargs: Any) -> ShardedQuerySet[_MM]: ...
        def order_by(self, *field_names: Any) -> ShardedQuerySet[_MM]: ...

else:
    _ShardedManagerBase = models.Manager.from_queryset(ShardedQuerySet)


class ShardedManager(_ShardedManagerBase[_MM]):
    """The default manager of a sharded model (``objects = ShardedManager()``).

    Typed by the model it is read from: ``Order.objects`` is a ``ShardedManager[Order]``
    and ``Order.objects.on_all_shards()`` a ``ShardedQuerySet[Order]``, with no
    annotation on ``objects``.
    """

    if TYPE_CHECKING:

        @overload
        def __get__(self, instance: None, owner: type[_N]) -> ShardedManager[_N]: ...
        @overload
        def __get__(self, instance: Any, owner: Any = None) -> Self: ...
        def __get__(self, instance: Any, owner: Any = None) -> Any: ...
