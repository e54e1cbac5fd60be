"""Fan-out of a Django query: run it on every shard (at once where that is safe) and merge
the rows by the core's merge rules (``uid_fields.ops.merge``): each backend's NULL order,
explicit ``nulls_first``/``nulls_last``, descending and several keys, and text keys in the
database's collation order.
"""

from __future__ import annotations

import threading
import time
from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import DatabaseError, connections, models
from django.db.models import F, OrderBy

from ..._internal import dbapi, pgmux
from ...errors import FanOutTimeoutError, UnmergeableQueryError
from ...ops import merge, parallel, streams
from ...sql.collation import (
    MYSQL_COLUMN_COLLATION,
    ranking_collation,
    ranks_by_code_point,
    text_rank_param,
    text_rank_sql,
)
from ..compat import (
    FlatValuesListIterable,
    ModelIterable,
    NamedValuesListIterable,
    ValuesIterable,
    iterable_class,
    lent_connection,
    ordering_request,
    prefetch_lookups,
    selected_names,
    where_of,
)
from ..conf import conf
from ..connections import pool_connections  # noqa: F401  (pool connections follow requests)
from ..connections.fences import FENCE_TRANSLATOR
from ..connections.replicas import WRITE_WATCHER, read_alias, read_pins
from ..relations.relation_filters import RelatedKeysIn
from .chunked import keyset_chunks, without_server_cursors
from .compiled import CompiledSelect

#: A query of one shard, run as Django runs it (the sharded QuerySet's per-shard clones).
ShardQuery = models.QuerySet[Any]

__all__ = [
    "CompiledSelect",
    "FanOutPlan",
    "OrderTerm",
    "gather",
    "merged_rows",
    "model_page",
    "order_terms",
    "streamed_rows",
]

#: (attribute name, descending, explicit nulls position or None)
OrderTerm = tuple[str, bool, merge.NullsOrder | None]


@dataclass(frozen=True)
class FanOutPlan:
    """What merging one query's shards needs, read from the query before any shard runs.

    The sharded QuerySet makes it (``FanOutPlan.of``) and hands it down with the
    queries of its shards: the fan-out reads the plan, never the QuerySet above it. An
    ordering the merge cannot repeat is refused while the plan is made.
    """

    model: type[models.Model]
    terms: list[OrderTerm]  # the ordering, as the merge repeats it
    iterable: type  # what the query yields: models, dicts, tuples or flat values
    names: list[str]  # the names given to values()/values_list() (empty: every field)

    @classmethod
    def of(cls, qs: models.QuerySet[Any]) -> FanOutPlan:
        return cls(qs.model, order_terms(qs), iterable_class(qs), selected_names(qs))


def order_terms(qs: models.QuerySet[Any]) -> list[OrderTerm]:
    """The query's ordering as (attribute, descending, nulls) terms, in the order a
    database applies them: ``order_by()`` or ``Meta.ordering`` (else the primary key),
    reversed by ``reverse()``. Field names, ``"-name"``, ``F("name")`` and
    ``F("name").asc(nulls_first=True)`` / ``.desc(nulls_last=True)`` merge; anything else
    (a related path, an expression, ``"?"``) is refused before a query runs."""
    ordering, standard = ordering_request(qs)
    terms = [_term(qs.model, item) for item in ordering or ["pk"]]
    if not standard:  # reverse(), as last() uses
        terms = [(n, not d, merge.reversed_nulls(nulls)) for n, d, nulls in terms]
    return terms


def _term(model: type[models.Model], item: Any) -> OrderTerm:
    descending = False
    nulls: merge.NullsOrder | None = None
    expression = item
    if isinstance(item, OrderBy):
        descending = item.descending
        nulls = merge.explicit_nulls(bool(item.nulls_first), bool(item.nulls_last))
        expression = item.expression
    if isinstance(expression, F):
        name = expression.name
    elif isinstance(expression, str):
        name = expression
        if name.startswith("-"):
            name, descending = name[1:], True
    else:
        name = ""
    attname = _attname(model, name)
    if attname is None:
        raise UnmergeableQueryError(
            f"ordering by {item!r} across shards: only fields of {model.__name__} can be "
            "merged from the shards' rows; order by a field (or run per shard with "
            ".using(alias))"
        )
    return attname, descending, nulls


def _attname(model: type[models.Model], name: str) -> str | None:
    meta = model._meta
    if not name or "__" in name or "." in name or name == "?":
        return None
    if name == "pk":
        return str(meta.pk.attname)
    try:
        field = meta.get_field(name)
    except FieldDoesNotExist:
        return None
    return getattr(field, "attname", None)


def merged_rows(plan: FanOutPlan, shards: Sequence[ShardQuery]) -> list[Any]:
    """The rows of every shard, sorted by the query's ordering by the core's merge rules.

    Values querysets that do not select their ordering columns fetch them as well and
    drop them after sorting, so the merge never falls back to shard order.
    """
    aliases = [shard.db for shard in shards]
    vendors = [connections[alias].vendor for alias in aliases]
    ranker = _text_ranker(plan.model, aliases[0]) if aliases else None
    shape = _Shape(plan)
    parts = gather(shards, lambda shard: list(shape.rows(shard)))
    rows = merge.merge_rows(parts, shape.keys, vendors, text_ranks=ranker)
    return shape.finish(rows)


def model_page(
    plan: FanOutPlan,
    first: ShardQuery,
    primaries: Sequence[str],
    shard_queries: Callable[[], Sequence[ShardQuery]],
    low: int,
    high: int | None,
) -> list[Any] | None:
    """The model instances of the merged rows ``[low:high]``: the query compiled once
    (``first``, the query of the first shard: the shards run one backend, so one SQL
    serves them all), run raw on every shard, the raw rows merged on their ordering
    values, and instances built only for the rows kept (``CompiledSelect``).
    None when that cannot be done (shards of different backends, a query that needs no
    database, an ordering field that is not selected, as under ``only()``), and the
    caller builds every shard's rows instead. ``shard_queries`` makes the query of each
    shard, only when the shards are read one pool thread each.
    """
    read_pins()
    aliases = [read_alias(primary) for primary in primaries]
    vendors = [connections[alias].vendor for alias in aliases]
    if len(set(vendors)) != 1:
        return None
    first._read_alias = aliases[0]
    compiled = CompiledSelect.of(first, aliases[0])
    if compiled is None:
        return None
    keys = []
    for name, descending, nulls in plan.terms:
        position = compiled.position(name)
        if position is None:
            return None
        keys.append(merge.SortKey(_column(position), descending, nulls, name))
    ranker = _text_ranker(plan.model, aliases[0])
    parts = _at_once(compiled, aliases) if vendors[0] == "postgresql" else None
    if parts is None:
        parts = gather(
            shard_queries(),
            lambda shard: [(shard.db, row) for row in compiled.fetch(shard.db)],
        )
    rows = merge.merge_rows(parts, keys, vendors, text_ranks=ranker)
    return compiled.models(rows[low:high])


def _column(position: int) -> Callable[[tuple[str, tuple[Any, ...]]], Any]:
    return lambda pair: pair[1][position]


#: The pool whose threads serve every PostgreSQL shard at once (``_at_once``).
_ALL_SHARDS = "all-shards"

#: uid_fields' own execute wrappers, which look at writes only (read-your-writes pins, the
#: shard move's fence): a page read sent below them loses nothing. Any other wrapper is a
#: user's observer (a query counter, a logger) and keeps the read on Django's path.
_OWN_WRAPPERS = (WRITE_WATCHER, FENCE_TRANSLATOR)


def _at_once(
    compiled: CompiledSelect, aliases: list[str]
) -> list[list[tuple[str, tuple[Any, ...]]]] | None:
    """Each shard's rows of ``compiled``, sent to every shard before any answer is read
    (``_internal.pgmux``): no thread per shard.

    The shards outside a transaction are read from one pool thread, on its connections.
    Those whose connection in this thread is inside ``atomic`` are read on that
    connection, so the read sees what the transaction wrote: from this thread, sent
    all at once too, while the pool thread reads the others (``parallel``'s ``here``).
    Where that cannot be done (a connection whose queries are observed: execute
    wrappers, ``DEBUG``'s query log, a driver other than psycopg 3, a transaction that
    must roll back) or a connection turned out broken, None: the caller reads each
    shard its usual way (``gather``)."""
    concurrency = conf.FAN_OUT_CONCURRENCY
    if (parallel.workers() if concurrency is None else concurrency) == 0:
        return None  # fan-outs run one shard after another on the calling thread
    held = [alias for alias in aliases if connections[alias].in_atomic_block]
    free = [alias for alias in aliases if alias not in held]
    if held and not all(_pipelines_in_transaction(alias) for alias in held):
        return None
    timeout = conf.FAN_OUT_TIMEOUT
    calls: list[Callable[[], list[list[tuple[str, tuple[Any, ...]]]] | None]] = []
    names = []
    if free:
        calls.append(lambda: _send_to_all(compiled, free, timeout))
        names.append(_ALL_SHARDS)
    if held:
        calls.append(lambda: _send_in_transaction(compiled, held, timeout))
        names.append(", ".join(held))
    try:
        answers = parallel.run_per_shard(
            calls,
            names=names,
            timeout=None if timeout is None else timeout + 1.0,  # the mux's own comes first
            concurrency=concurrency,
            pooled=bool(free),
            here=[len(calls) - 1] if held else [],
        )
    except FanOutTimeoutError as late:
        if _ALL_SHARDS not in late.shards:
            raise
        # The pool thread was still connecting (a server that accepts and never
        # answers): name the shards it had not reached, not the pool.
        shards = sorted({*(s for s in late.shards if s != _ALL_SHARDS), *_unconnected(free)})
        raise FanOutTimeoutError(
            f"no answer within {timeout:g} s from {', '.join(shards)} (connecting): the "
            "fan-out gave up on them; raise FAN_OUT_TIMEOUT / fan_out_timeout= for slow "
            "queries",
            shards=shards,
        ) from late
    if any(parts is None for parts in answers):
        return None
    groups = [group for group in (free, held) if group]
    found: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
    for group, parts in zip(groups, answers, strict=True):
        found.update(zip(group, parts or (), strict=True))
    return [found[alias] for alias in aliases]


def _pipelines_in_transaction(alias: str) -> bool:
    """Whether this thread's connection to ``alias``, inside ``atomic``, can be read with
    ``pgmux`` (psycopg 3, nothing observing its queries, a transaction not marked for
    rollback: that one must raise Django's own error)."""
    connection = connections[alias]
    raw = connection.connection
    if raw is None or connection.needs_rollback or connection.queries_logged:
        return False
    if any(w not in _OWN_WRAPPERS for w in connection.execute_wrappers):
        return False
    return pgmux.available(raw, in_transaction=True)


def _send_in_transaction(
    compiled: CompiledSelect, aliases: list[str], timeout: float | None
) -> list[list[tuple[str, tuple[Any, ...]]]]:
    """The rows of ``compiled`` on this thread's connections to ``aliases``, each inside
    its transaction, sent to all before any answer is read. An error there is raised as
    Django's (the transaction is aborted, as a cursor's error would leave it); a deadline
    that passes closes the late connections, and ``atomic`` rolls back."""
    wrappers = [connections[alias] for alias in aliases]
    raws = [connection.connection for connection in wrappers]
    for raw in raws:
        _interruptible_raw(raw)
    failures: dict[int, Exception] = {}
    try:
        with wrappers[0].wrap_database_errors:
            query = pgmux.bind(raws[0], compiled.sql, compiled.params)
            answers = pgmux.fetch_at_once(
                raws, query, timeout=timeout, names=aliases, failures=failures
            )
    except FanOutTimeoutError as late:
        for alias in late.shards:
            connections[alias].close()  # inside atomic: the block rolls back
        raise
    for position, error in sorted(failures.items()):
        with wrappers[position].wrap_database_errors:
            raise error
    converted = iter(compiled.converted([row for rows in answers for row in rows or ()]))
    return [
        [(alias, next(converted)) for _ in rows or ()]
        for alias, rows in zip(aliases, answers, strict=True)
    ]


#: The aliases a pool thread of ``_send_to_all`` is connecting to, by thread: what a
#: deadline that passes while it connects names.
_connecting: dict[int, str] = {}


def _unconnected(aliases: list[str]) -> list[str]:
    """Those of ``aliases`` some pool thread is connecting to now (all when none is)."""
    pending = [alias for alias in list(_connecting.values()) if alias in aliases]
    return pending or aliases


def _send_to_all(
    compiled: CompiledSelect, aliases: list[str], timeout: float | None
) -> list[list[tuple[str, tuple[Any, ...]]]] | None:
    # Connecting counts inside the deadline (with CONN_MAX_AGE = 0 every fan-out
    # connects): the mux gets what is left of it.
    deadline = None if timeout is None else time.monotonic() + timeout
    wrappers = [connections[alias] for alias in aliases]
    for alias, connection in zip(aliases, wrappers, strict=True):
        _fresh_worker_connection(alias)
        _connect(alias, connection)
        wrappers_seen = [w for w in connection.execute_wrappers if w not in _OWN_WRAPPERS]
        observed = wrappers_seen or connection.queries_logged
        if observed or connection.in_atomic_block or not pgmux.available(connection.connection):
            return None
    raws = [connection.connection for connection in wrappers]
    for raw in raws:
        _interruptible_raw(raw)
    try:
        query = pgmux.bind(raws[0], compiled.sql, compiled.params)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        answers = pgmux.fetch_at_once(raws, query, timeout=left, names=aliases)
    except FanOutTimeoutError as late:
        for alias in late.shards:
            connections[alias].close()  # a query may still run there: never reuse it
        raise FanOutTimeoutError(
            f"no answer within {timeout:g} s from {', '.join(late.shards)}: the fan-out "
            "gave up on them (their connections are discarded); raise FAN_OUT_TIMEOUT / "
            "fan_out_timeout= for slow queries",
            shards=late.shards,
        ) from None
    except Exception:  # a broken connection (a server restarted): the usual way instead
        for connection in wrappers:
            if not connection.is_usable():
                connection.close()
        return None
    # Django's converters, once for the rows of every shard.
    converted = iter(compiled.converted([row for rows in answers for row in rows or ()]))
    parts = []
    for alias, rows in zip(aliases, answers, strict=True):
        if rows is None:
            # The query failed there. A connection the server closed (a restart while it
            # sat idle) is replaced and the read made once more; otherwise it runs again
            # the usual way, which raises Django's own error.
            if not connections[alias].is_usable():
                connections[alias].close()
            parts.append([(alias, row) for row in compiled.fetch(alias)])
        else:
            parts.append([(alias, next(converted)) for _ in rows])
    return parts


def _interruptible_raw(raw: Any) -> None:
    parallel.on_timeout(lambda: dbapi.interrupt(raw))


def streamed_rows(
    plan: FanOutPlan, shards: Sequence[ShardQuery], chunk_size: int
) -> Iterator[Any] | None:
    """The rows of every shard in the query's order, read as a stream: each shard's
    cursor in chunks of ``chunk_size`` (a server-side cursor on PostgreSQL), merged by
    ``ops.streams`` holding one row per shard. None when the ordering has a text key
    whose collation does not rank strings as code points: only a whole-result merge
    (``merged_rows``) can ask the database for those ranks.

    The shards' cursors are read from this thread, on its connections (Django's are
    per thread and a cursor is read where it was opened), so inside ``atomic`` the
    stream sees the transaction, as ``list()`` of the query would.
    """
    terms = plan.terms
    aliases = _chosen_reads(shards)
    vendors = [connections[alias].vendor for alias in aliases]
    ranker = _text_ranker(plan.model, aliases[0]) if aliases else None
    text_keys = {name for name, _, _ in terms if _is_text(plan.model, name)}
    for name in text_keys:
        if not streams.text_streams(merge.SortKey(_no_value, name=name), ranker):
            return None
    shape = _Shape(plan)
    parts = [shape.rows(shard, chunk_size) for shard in shards]
    merged = streams.merge_streams(parts, shape.keys, vendors, text_keys=text_keys)
    return shape.each(merged)


def _no_value(row: Any) -> Any:
    return None


def _is_text(model: type[models.Model], attname: str) -> bool:
    for field in model._meta.concrete_fields:
        if field.attname == attname:
            return isinstance(field, (models.CharField, models.TextField))
    return False


class _Shape:
    """How a fan-out reads each shard's rows and gives them back in the query's form.

    Models and ``values()`` of every field carry their ordering values; other values
    querysets fetch the ordering columns too, as tuples, and drop them after the merge.
    """

    def __init__(self, plan: FanOutPlan) -> None:
        terms = plan.terms
        self.iterable = plan.iterable
        self.names = list(plan.names)
        self.plain = issubclass(self.iterable, ModelIterable) or (
            self.iterable is ValuesIterable and not self.names
        )
        if self.plain:
            get: Callable[[Any, str], Any] = (
                getattr if issubclass(self.iterable, ModelIterable) else _item
            )
            self.wanted: list[str] = []
        else:
            names = self.names or [f.attname for f in plan.model._meta.concrete_fields]
            self.names = names
            pk_name = plan.model._meta.pk.attname
            columns = [pk_name if n == "pk" else n for n in names]
            # The primary key comes too: a stream read in keyset chunks orders by it last.
            extra = [
                name
                for name in dict.fromkeys([*(t[0] for t in terms), pk_name])
                if name not in columns
            ]
            self.wanted = [*names, *extra]
            index = {name: i for i, name in enumerate([*columns, *extra])}
            get = lambda row, n: row[index[n]]  # noqa: E731
        self.keys = [
            merge.SortKey(_reader(get, name), descending, nulls, name)
            for name, descending, nulls in terms
        ]
        pk = str(plan.model._meta.pk.attname)
        self.chunk_keys = [*self.keys] + (
            []
            if pk in {key.name for key in self.keys}
            else [merge.SortKey(_reader(get, pk), name=pk)]
        )

    def rows(self, shard: Any, chunk_size: int | None = None) -> Any:
        """The shard's rows, read whole or, with ``chunk_size``, as a chunked cursor."""
        source = shard if self.plain else shard.values_list(*self.wanted)
        if chunk_size is not None:
            if without_server_cursors(shard.db):
                rows = keyset_chunks(source, self.chunk_keys, chunk_size)
            else:
                rows = source.iterator(chunk_size=chunk_size)
            return rows if self.plain else (tuple(row) for row in rows)
        return list(source) if self.plain else [tuple(row) for row in source]

    def finish(self, rows: list[Any]) -> list[Any]:
        return rows if self.plain else list(self.each(iter(rows)))

    def each(self, rows: Iterator[Any]) -> Iterator[Any]:
        if self.plain:
            return rows
        names, width = self.names, len(self.names)
        if self.iterable is ValuesIterable:
            return (dict(zip(names, row[:width], strict=True)) for row in rows)
        if self.iterable is FlatValuesListIterable:
            return (row[0] for row in rows)
        if self.iterable is NamedValuesListIterable:
            factory = namedtuple("Row", names)
            return (factory(*row[:width]) for row in rows)
        return (row[:width] for row in rows)


def _item(row: Any, name: str) -> Any:
    return row[name]


def _reader(get: Callable[[Any, str], Any], name: str) -> Callable[[Any], Any]:
    return lambda row: get(row, name)


def _collation(alias: str, model: type[models.Model], field: Any) -> str | None:
    """The collation ``field``'s text keys rank under (the core's rule)."""
    table = model._meta.db_table

    def read() -> str | None:
        with connections[alias].cursor() as cursor:
            cursor.execute(MYSQL_COLUMN_COLLATION.format(p="%s"), [table, field.column])
            row = cursor.fetchone()
        return row[0] if row else None

    declared = getattr(field, "db_collation", None)
    vendor = connections[alias].vendor
    return ranking_collation(vendor, declared, ("django", alias, table, field.column), read)


def _text_ranker(model: type[models.Model], alias: str) -> merge.TextRanker:
    """Ranks text keys in the column's collation, asked of one shard's database."""
    fields = {getattr(f, "attname", f.name): f for f in model._meta.concrete_fields}

    def rank(key: merge.SortKey, texts: list[str]) -> Mapping[str, int]:
        connection = connections[alias]
        field = fields.get(key.name)
        collation = _collation(alias, model, field) if field is not None else None
        if ranks_by_code_point(connection.vendor, collation):
            return merge.code_point_ranks(texts)  # BINARY compares code points, as Python

        def ask(values: list[str]) -> Mapping[str, int]:
            with connection.cursor() as cursor:
                sql = text_rank_sql(connection.vendor, collation)
                cursor.execute(sql, [text_rank_param(values)])
                return {value: number for value, number in cursor.fetchall()}

        column = (alias, model._meta.db_table, key.name, collation)
        return merge.rank_texts(column, texts, ask)

    return rank


def gather(shards: Sequence[ShardQuery], work: Callable[[Any], Any]) -> list[Any]:
    """``work(shard)`` for each shard's queryset, in order: at the same time (on the
    core's bounded pool) when every shard is a server database (not SQLite). A shard
    whose connection in this thread is inside ``atomic`` is read on that connection, so
    the work sees the transaction (``_on_held``); the others on the pool threads' own."""
    aliases = _chosen_reads(shards)
    # A shard inside ``atomic`` is read on the transaction's own connection, lent to
    # a pool thread (``_on_held``): the transaction is no reason to read one by one.
    # But a filter through a relation on another database reads that database while the
    # query compiles, on the pool thread's own connection, which would not see what
    # this thread's transaction wrote there: such a query is read here, one by one.
    at_once = parallel.may_run_at_once(
        [connections[alias].vendor for alias in aliases],
        holds_shard_work=_in_a_transaction() and any(_reads_elsewhere(s) for s in shards),
    )
    calls = [
        _on_held(alias, shard, work)
        if connections[alias].in_atomic_block
        else _on_shard(alias, shard, work)
        for alias, shard in zip(aliases, shards, strict=True)
    ]
    return parallel.run_per_shard(
        calls,
        parallel=at_once,
        names=aliases,
        timeout=conf.FAN_OUT_TIMEOUT,
        concurrency=conf.FAN_OUT_CONCURRENCY,
    )


def _in_a_transaction() -> bool:
    """Whether any of this thread's open connections is inside ``atomic``."""
    return any(c.in_atomic_block for c in connections.all(initialized_only=True))


def _reads_elsewhere(shard: ShardQuery) -> bool:
    """Whether the query reads other databases while a shard's rows are read: a filter
    through a relation to rows of another database (``RelatedKeysIn``, whose keys are
    read from there when it compiles), or ``prefetch_related()`` lookups (on Django 6.1,
    where each shard's rows are built by Django, prefetched with them)."""
    if prefetch_lookups(shard):
        return True
    pending = [where_of(shard.query)]
    while pending:
        node = pending.pop()
        if isinstance(node, RelatedKeysIn):
            return True
        pending.extend(getattr(node, "children", ()))
    return False


def _on_held(alias: str, shard: Any, work: Callable[[Any], Any]) -> Callable[[], Any]:
    """``work(shard)`` on the calling thread's connection to ``alias``, which is inside
    ``atomic``: on a pool thread, that connection lent to it for the call (Django's
    thread sharing, as its live server lends a test's connection), while the calling
    thread waits and touches none of it. The call's ``connections[alias]`` is that
    connection, so the work sees the transaction's writes; nothing is retried, and the
    connection is never closed there (it holds the transaction: a deadline that cuts it
    leaves ``atomic`` to roll back)."""
    lent = connections[alias]

    def run() -> Any:
        if not parallel.in_worker():
            return work(shard)
        with lent_connection(alias, lent):
            _interruptible(lent)
            return work(shard)

    return run


def _chosen_reads(shards: Sequence[ShardQuery]) -> list[str]:
    """The database each shard's query reads (a replica or the primary), chosen once."""
    read_pins()  # made here, so the pool's workers share this request's pins
    aliases = [shard.db for shard in shards]
    for shard, alias in zip(shards, aliases, strict=True):
        shard._read_alias = alias  # the replica (or primary) chosen here, not again there
    return aliases


def _on_shard(alias: str, shard: Any, work: Callable[[Any], Any]) -> Callable[[], Any]:
    """``work(shard)`` on a pool thread: on a connection that a deadline can cut, and
    once more on a fresh connection when the first one turned out broken (a server that
    restarted while the connection sat idle in the pool). Only reads fan out, so the
    retry repeats nothing; an error of the query itself is not retried."""

    def run() -> Any:
        if not parallel.in_worker():
            return work(shard)
        connection = connections[alias]
        _interruptible(connection)
        _fresh_worker_connection(alias)

        def dropped(error: Exception) -> bool:
            if not isinstance(error, DatabaseError):
                return False
            broken = connection.connection is None or not connection.is_usable()
            connection.close()  # a broken connection must not serve the next query
            return broken

        return parallel.once_more_after_drop(lambda: _attempt(connection, shard, work), dropped)

    return run


def _attempt(connection: Any, shard: Any, work: Callable[[Any], Any]) -> Any:
    _connect(connection.alias, connection)
    _interruptible(connection)
    return work(shard)


def _connect(alias: str, connection: Any) -> None:
    """``ensure_connection()`` on a pool thread; an error names the shard (Django's own
    says only "connection timeout expired"), in Django's type, as raised there."""
    me = threading.get_ident()
    _connecting[me] = alias
    try:
        connection.ensure_connection()
    except DatabaseError as error:
        raise type(error)(f"{alias}: connecting failed: {error}") from error
    finally:
        _connecting.pop(me, None)


def _interruptible(connection: Any) -> None:
    raw = connection.connection
    if raw is not None:
        parallel.on_timeout(lambda: dbapi.interrupt(raw))


#: A pool thread's connection idle this long is checked before use (a server may have
#: closed it: MySQL's wait_timeout, a restart), as Django checks at each request.
_IDLE_CHECK_S = 30.0


_last_used = threading.local()


def _fresh_worker_connection(alias: str) -> None:
    used: dict[str, float] = getattr(_last_used, "at", None) or {}
    _last_used.at = used
    now = time.monotonic()
    connection = connections[alias]
    idle = now - used.get(alias, now) > _IDLE_CHECK_S
    if connection.connection is not None and idle and not connection.is_usable():
        connection.close()
    used[alias] = now


def _close_worker_connections() -> None:
    connections.close_all()  # the calling worker thread's own connections


parallel.on_worker_exit(_close_worker_connections)
