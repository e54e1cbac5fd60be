"""Explicit fan-out: one SELECT run on every shard, answered as one database would.

``session.on_all_shards(select(...))`` is planned by the core (``uid_fields.ops.planner``)
from ``describe``'s account of the statement, and refused before anything runs when the
answer does not decompose. Rows run on every shard with LIMIT pushed down (``LIMIT offset +
limit``) and merge in the statement's ORDER BY (by default the id, which for these ids is
creation time) by the core's merge rules (each backend's NULL order, ``nulls_first()``/
``nulls_last()``, text in the column's collation); aggregates, groups, HAVING and distinct
values are combined by the core (``uid_fields.ops.combine``) from the SELECT each shard
runs for the plan (``describe.shard_select``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from sqlalchemy import Select, String, inspect, text
from sqlalchemy.engine import Connection, FrozenResult, Result, Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Mapper, Session
from sqlalchemy.orm.exc import UnmappedColumnError
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import ColumnElement, Label, UnaryExpression
from sqlalchemy.sql.schema import Column
from sqlalchemy.sql.selectable import CompoundSelect

from .._internal import dbapi, pgmux
from ..errors import FanOutTimeoutError, UnmergeableQueryError
from ..ops import merge as merging
from ..ops import parallel, planner, streams
from ..ops.combine import combine, distinct_rows
from ..sql.collation import (
    MYSQL_COLUMN_COLLATION,
    ranking_collation,
    ranks_by_code_point,
    text_rank_param,
    text_rank_sql,
)
from .async_fanout import dropped, on_event_loop, read_on_loop
from .compat import (
    compiled_select,
    frozen_rows,
    has_options,
    has_statement_hooks,
    into_session,
    joined_relationships,
    loaded_object,
    object_result,
    observed,
    result_keys,
    result_of,
    rows_result,
    select_parts,
    stream_rows,
    streamed_result,
)
from .describe import AGGREGATES, describe, function_name, shard_select
from .guard import guarded
from .routing import Router
from .session_base import ShardedSessionBase

__all__ = ["FanOutPlan", "UnmergeableQueryError", "fan_out", "plan_fan_out", "text_ranker"]


@dataclass(frozen=True)
class FanOutPlan:
    """What each shard runs and how the answers are put together: ``core`` is the core
    planner's plan; rows plans merge here in the ORDER BY (``sort``), aggregate and group
    plans are combined by the core (``ops.combine``) under ``keys``."""

    per_shard: Select[Any]
    sort: list[merging.SortKey]
    columns: list[Any]  # the ORDER BY column of each sort key (for its collation)
    window: tuple[int, int | None] | None  # (offset, limit) applied after the merge
    core: planner.Plan
    keys: list[str] = field(default_factory=list)  # result keys of a combined answer
    texts: dict[str, Any] = field(default_factory=dict)  # output name -> its column
    #: A joined eager load of a collection: the ORM's rows repeat a parent per child, so
    #: the window counts parents only once each (as SQLAlchemy's own LIMIT subquery does).
    unique: bool = False

    @property
    def combined(self) -> bool:
        """Whether the answer is combined by the core (aggregates, groups), not merged
        rows of the statement."""
        return self.core.kind != "rows"

    def merge(
        self,
        results: Sequence[Result[Any]],
        vendors: Sequence[str],
        text_ranks: merging.TextRanker | None = None,
    ) -> Result[Any]:
        if self.combined:
            parts = [[tuple(row) for row in result] for result in results]
            rows = combine(self.core, parts, vendors, text_ranks=text_ranks)
            return rows_result(self.keys, rows)
        frozen: list[FrozenResult[Any]] = [result.freeze() for result in results]
        rows = merging.merge_rows(
            [frozen_rows(f) for f in frozen], self.sort, vendors, text_ranks=text_ranks
        )
        if self.core.distinct:
            rows = distinct_rows(rows, self.core.statement, merging.backend_of(vendors), text_ranks)
        if self.unique:
            rows = _unique_objects(rows)
        if self.window is not None:
            rows = merging.window(rows, *self.window)
        return _result(frozen[0], rows)

    def column_of(self, key: merging.SortKey) -> Any:
        """The column behind ``key`` (None for a label or an expression)."""
        if key in self.sort:
            return self.columns[self.sort.index(key)]
        return self.texts.get(key.name)


def _unique_objects(rows: list[Any]) -> list[Any]:
    """``rows`` with each repeat of an earlier row's objects left out."""
    seen: set[Any] = set()
    kept = []
    for row in rows:
        key = tuple(map(id, row)) if isinstance(row, (Row, tuple)) else id(row)
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept


def _result(template: FrozenResult[Any], rows: list[Any]) -> Result[Any]:
    return result_of(template, rows)  # the shards' rows, merged, behind the first's metadata


def plan_fan_out(statement: Any, router: Router) -> FanOutPlan:
    """How to run ``statement`` on every shard; ``UnmergeableQueryError`` if it cannot be
    answered exactly (the core planner decides, from ``describe``'s account of it)."""
    if not isinstance(statement, (Select, CompoundSelect)):
        raise UnmergeableQueryError(
            "on_all_shards() merges SELECT statements; send UPDATE and DELETE with id "
            "criteria, or to each shard with bind_arguments={'shard_id': ...}"
        )
    described = describe(statement, router)
    core = planner.plan(described.statement)
    assert isinstance(statement, Select)
    texts = {
        output.name: _unwrap_label(expression)
        for output, expression in zip(
            described.statement.outputs, described.expressions, strict=True
        )
        if output.text
    }  # the column of each text output, for its collation
    if core.kind != "rows":
        keys = result_keys(statement, None)
        return FanOutPlan(shard_select(described, core), [], [], None, core, keys, texts)
    parts = select_parts(statement)
    order = parts.order_by
    if not order and not core.distinct:
        order = [c for c in _entity_ids(statement)]
        statement = statement.order_by(*order)
    terms = [_sort_key(statement, clause) for clause in order]
    sort = [key for key, _ in terms]
    columns = [column for _, column in terms]
    window = None
    limit, offset = parts.limit, parts.offset
    per_shard = statement
    if limit is not None or offset:
        window = (offset or 0, limit)
        per_shard = statement.offset(None).limit(None if limit is None else (offset or 0) + limit)
    unique = any(r.uselist for r in joined_relationships(statement))
    return FanOutPlan(per_shard, sort, columns, window, core, texts=texts, unique=unique)


def needs_combining(statement: Select[Any]) -> bool:
    """Whether the rows of several shards must be combined, not just put one after
    another, to answer ``statement``: an ORDER BY, LIMIT or OFFSET, DISTINCT, GROUP BY,
    HAVING, an aggregate, or a joined eager load."""
    parts = select_parts(statement)
    if parts.order_by or parts.has_window or parts.fetch or parts.distinct or parts.group_by:
        return True
    if parts.having or joined_relationships(statement):
        return True
    return any(function_name(c) in AGGREGATES for c in statement.selected_columns)


def _unwrap_label(column: Any) -> Any:
    return column.element if isinstance(column, Label) else column


def _entity_ids(statement: Select[Any]) -> list[ColumnElement[Any]]:
    """The primary key of the first entity selected: the default merge order."""
    for description in statement.column_descriptions:
        entity = description.get("entity")
        mapper = getattr(entity, "__mapper__", None)
        if isinstance(mapper, Mapper):
            return list(mapper.primary_key)
    raise UnmergeableQueryError(
        "a fan-out of plain columns needs an ORDER BY to merge the shards' rows"
    )


def _sort_key(statement: Select[Any], clause: Any) -> tuple[merging.SortKey, Any]:
    descending = False
    nulls: merging.NullsOrder | None = None
    if isinstance(clause, UnaryExpression) and clause.modifier in (
        operators.nulls_first_op,
        operators.nulls_last_op,
    ):
        nulls = merging.explicit_nulls(
            clause.modifier is operators.nulls_first_op, clause.modifier is operators.nulls_last_op
        )
        clause = clause.element
    element = clause
    if isinstance(clause, UnaryExpression) and clause.modifier in (
        operators.desc_op,
        operators.asc_op,
    ):
        descending = clause.modifier is operators.desc_op
        element = clause.element
    while isinstance(element, Label):
        element = element.element
    descriptions = statement.column_descriptions
    entities = [
        (position, d["entity"].__mapper__)
        for position, d in enumerate(descriptions)
        if d.get("entity") is not None
        and d.get("expr") is d.get("entity")
        and isinstance(getattr(d["entity"], "__mapper__", None), Mapper)
    ]
    if entities and isinstance(element, Column):
        for position, mapper in entities:
            try:
                prop = mapper.get_property_by_column(element)
            except UnmappedColumnError:  # not a column of this entity
                continue
            get = _by_position(position, len(descriptions))
            attribute = lambda row, g=get, k=prop.key: getattr(g(row), k)  # noqa: E731
            return merging.SortKey(attribute, descending, nulls, str(element)), element
    if not entities:
        for position, column in enumerate(statement.selected_columns):
            plain = column.element if isinstance(column, Label) else column
            if plain is element or plain.compare(element):
                read = _by_position(position, len(descriptions))
                return merging.SortKey(read, descending, nulls, str(element)), plain
    raise UnmergeableQueryError(
        f"ORDER BY {element} across shards: order by a selected column or a column of "
        "the selected entity, so the shards' rows can be merged"
    )


def _by_position(position: int, width: int) -> Callable[[Any], Any]:
    def get(row: Any) -> Any:
        # Frozen ORM results of one entity hold the objects themselves, not rows.
        return row[position] if isinstance(row, (Row, tuple)) else row

    return get


def text_ranker(
    plan: FanOutPlan, shard: str, dialect: str, run: Callable[[str, dict[str, Any]], list[Any]]
) -> merging.TextRanker:
    """Ranks text keys in their column's collation, asked of ``shard``'s database through
    ``run(sql, params) -> rows``."""

    def rank(key: merging.SortKey, texts: list[str]) -> Mapping[str, int]:
        column = plan.column_of(key)
        declared = getattr(getattr(column, "type", None), "collation", None)
        table = getattr(getattr(column, "table", None), "name", None)
        if table is None:  # not a table's column (a label): the literal's collation
            collation = declared or None
        else:
            name = str(column.name)

            def read() -> str | None:
                sql = MYSQL_COLUMN_COLLATION.replace("{p}", ":t", 1).replace("{p}", ":c", 1)
                rows = run(sql, {"t": str(table), "c": name})
                return rows[0][0] if rows else None

            column_key = ("sqlalchemy", shard, str(table), name)
            collation = ranking_collation(dialect, declared, column_key, read)
        if ranks_by_code_point(dialect, collation):
            return merging.code_point_ranks(texts)  # BINARY compares code points, as Python

        def ask(values: list[str]) -> Mapping[str, int]:
            sql = text_rank_sql(dialect, collation, ":texts")
            return {value: n for value, n in run(sql, {"texts": text_rank_param(values)})}

        return merging.rank_texts((shard, table, str(key.name), collation), texts, ask)

    return rank


def fan_out(
    session: ShardedSessionBase,
    statement: Any,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    shards: Sequence[str] | None = None,
) -> Result[Any]:
    """``statement`` run on every shard of ``session`` (or on ``shards``, those its
    criteria name) and the answers merged: at once (on the core's bounded pool, a
    connection per shard; over async drivers, one task per shard on the event loop) where
    that is safe, else one shard after another through the session."""
    plan = plan_fan_out(statement, session.router)
    shards = list(session.shard_names if shards is None else shards)
    if not plan.combined and not plan.core.distinct and _streams(plan.per_shard, options):
        streamed = _stream(session, plan, params, options, shards)
        if streamed is not None:
            return streamed
    if _in_parallel(session, plan.per_shard):
        # Each shard's primary or, for this read, one of its replicas: chosen here.
        engines = {s: session.get_bind(shard_id=s, clause=plan.per_shard) for s in shards}

        objects = _selects_objects(plan.per_shard)
        held = session.held_connections()
        if held and on_event_loop(engines):
            return _through_session(session, plan, params, options, shards)
        if on_event_loop(engines) and not objects:
            # Async drivers: rows of columns read by one task per shard on the event loop.
            timeout = session.fan_out_timeout
            results = read_on_loop(engines, plan.per_shard, params, options, timeout)
            return _merged(session, plan, results, shards)
        if on_event_loop(engines):
            # Objects over async drivers: their rows read as columns by one task per
            # shard on the event loop, under the deadline, and made objects here; what
            # a row of columns does not hold comes through the session, one shard after
            # another (its connections live on the event loop).
            kept = _kept_rows(session, plan, shards, engines, params, options)
            if kept is not None:
                return kept
            return _through_session(session, plan, params, options, shards)
        kept = _kept_rows(session, plan, shards, engines, params, options) if objects else None
        if kept is not None:
            return kept
        concurrency = session.fan_out_concurrency
        at_once = (parallel.workers() if concurrency is None else concurrency) != 0
        if held and not objects and not options and at_once:
            # Columns with shards in the transaction: every shard's SQL sent at once.
            answers = _at_once(plan, shards, engines, params, session.fan_out_timeout, held)
            if answers is not None:
                parts = [rows_result(keys, [row for _, row in rows]) for keys, rows in answers]
                return _merged(session, plan, parts, shards)

        def on(shard: str) -> Callable[[], Result[Any]]:
            # Objects carry their shard in their identity key, as the session's would.
            shard_options = {**options, "identity_token": shard} if objects else options
            if shard in held:
                return lambda: _read_on(held[shard], plan.per_shard, params, shard_options, objects)

            def read() -> Result[Any]:
                return _read(engines[shard], plan.per_shard, params, shard_options, objects)

            return lambda: parallel.once_more_after_drop(read, dropped)

        results = parallel.run_per_shard(
            [on(shard) for shard in shards],
            names=shards,
            timeout=session.fan_out_timeout,
            concurrency=session.fan_out_concurrency,
            here=_held(shards, held),
        )
        if objects:
            merged = _merged(session, plan, results, shards)
            # The rows kept, into the session's identity map (no SQL: load=False).
            return into_session(session, plan.per_shard, merged)
        return _merged(session, plan, results, shards)
    return _through_session(session, plan, params, options, shards)


def _through_session(
    session: ShardedSessionBase,
    plan: FanOutPlan,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    shards: list[str],
) -> Result[Any]:
    """The fan-out one shard after another on the session's own connections: what its
    transaction wrote is seen, and its objects are its identity map's."""

    def through_session(shard: str) -> Callable[[], Result[Any]]:
        bind = {"shard_id": shard}
        return lambda: session.execute(
            plan.per_shard, params, execution_options=options, bind_arguments=bind
        )

    results = parallel.run_per_shard(
        [through_session(shard) for shard in shards], parallel=False, names=shards
    )
    return _merged(session, plan, results, shards)


def plain_columns(mapper: Mapper[Any]) -> list[tuple[str, Column[Any]]] | None:
    """``(attribute, column)`` of every column attribute of ``mapper``, when each is one
    plain, undeferred column of its table and the class inherits nothing: what a row of
    ``select(Class)`` run as Core holds entirely. None otherwise."""
    if mapper.inherits is not None or mapper.polymorphic_on is not None:
        return None
    pairs: list[tuple[str, Column[Any]]] = []
    for prop in mapper.column_attrs:
        column = prop.columns[0]
        if not isinstance(column, Column) or column.table is not mapper.local_table:
            return None
        if len(prop.columns) != 1 or prop.deferred:
            return None
        pairs.append((prop.key, column))
    return pairs


def _kept_rows(
    session: ShardedSessionBase,
    plan: FanOutPlan,
    shards: list[str],
    engines: Mapping[str, Any],
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
) -> Result[Any] | None:
    """``select(Class)`` over the shards, building objects of only the rows kept: each
    shard's rows are read as columns (no ORM loading there), merged on the ORDER BY
    columns, cut to the window, and only then made objects of the session
    (``compat.loaded_object``, no SQL). None for what a row of columns does not hold
    entirely (inheritance, ``column_property`` expressions, deferred columns, ORM
    execution options): the caller loads objects shard by shard instead."""
    descriptions = plan.per_shard.column_descriptions
    if len(descriptions) != 1 or options or plan.per_shard.get_execution_options():
        return None
    mapper = inspect(descriptions[0]["entity"])
    columns = plain_columns(mapper) if isinstance(mapper, Mapper) else None
    if columns is None or any(not isinstance(c, Column) for c in plan.columns):
        return None

    held = session.held_connections()

    def on(shard: str) -> Callable[[], tuple[list[str], list[tuple[str, tuple[Any, ...]]]]]:
        def run() -> tuple[list[str], list[tuple[str, tuple[Any, ...]]]]:
            if shard in held:  # the transaction's connection, on this thread
                result = _read_on(held[shard], plan.per_shard, params, {})
                return list(result.keys()), [(shard, tuple(row)) for row in result]
            result = parallel.once_more_after_drop(
                lambda: _read(engines[shard], plan.per_shard, params, {}), dropped
            )
            return list(result.keys()), [(shard, tuple(row)) for row in result]

        return run

    concurrency = session.fan_out_concurrency
    answers = None
    started = time.monotonic()  # one deadline for the mux and the pool after it
    if on_event_loop(engines):
        results = read_on_loop(engines, plan.per_shard, params, {}, session.fan_out_timeout)
        answers = [
            (list(result.keys()), [(shard, tuple(row)) for row in result])
            for shard, result in zip(shards, results, strict=True)
        ]
    elif (parallel.workers() if concurrency is None else concurrency) != 0:
        answers = _at_once(plan, shards, engines, params, session.fan_out_timeout, held)
    if answers is None:
        answers = parallel.run_per_shard(
            [on(shard) for shard in shards],
            names=shards,
            timeout=_left(session.fan_out_timeout, started),
            concurrency=concurrency,
            here=_held(shards, held),
        )
    # Columns by position (a row looked up by Column object compares SQL expressions).
    index = {name: i for i, name in enumerate(answers[0][0])} if answers else {}
    if any(c.key not in index for c in [*plan.columns, *(c for _, c in columns)]):
        return None
    keys = [
        merging.SortKey(_at(index[column.key]), key.descending, key.nulls, key.name)
        for key, column in zip(plan.sort, plan.columns, strict=True)
    ]
    dialects = [session.get_bind(shard_id=s).dialect.name for s in shards]

    def run_sql(sql: str, values: dict[str, Any]) -> list[Any]:
        bind = {"shard_id": shards[0]}
        return [tuple(row) for row in session.execute(text(sql), values, bind_arguments=bind)]

    ranker = text_ranker(replace(plan, sort=keys), shards[0], dialects[0], run_sql)
    rows = merging.merge_rows([rows for _, rows in answers], keys, dialects, text_ranks=ranker)
    if plan.window is not None:
        rows = merging.window(rows, *plan.window)
    positions = [(name, index[column.key]) for name, column in columns]
    key_positions = [index[column.key] for column in mapper.primary_key]
    objects = [
        loaded_object(session, mapper, positions, key_positions, values, shard)
        for shard, values in rows
    ]
    return object_result(mapper.class_.__name__, objects)


def _at_once(
    plan: FanOutPlan,
    shards: list[str],
    engines: Mapping[str, Any],
    params: Mapping[str, Any] | None,
    timeout: float | None,
    held: Mapping[str, Connection],
) -> list[tuple[list[str], list[tuple[str, tuple[Any, ...]]]]] | None:
    """Each shard's rows of the statement, sent to every shard before any answer is read
    (``_internal.pgmux``), from this thread and with no thread per shard: the statement
    compiled and bound once, each shard's connection taken from its engine's pool and
    given back; a shard whose connection the session's transaction holds (``held``) is
    read on that one, inside its transaction, and an error there is raised as
    SQLAlchemy's (that transaction is aborted). None where that cannot be done (a
    driver other than psycopg 3, engines with event listeners, a statement
    ``compat.compiled_select`` does not repeat, an error on a shard outside a
    transaction, a broken connection): the caller reads each shard on its pool thread,
    as before."""
    dialects = {engines[s].dialect for s in shards}
    dialect = engines[shards[0]].dialect
    if len({(d.name, d.driver) for d in dialects}) != 1 or dialect.driver != "psycopg":
        return None
    if any(observed(engines[s], own=int(guarded(engines[s]))) for s in shards):
        return None  # every statement stays visible to the engines' listeners
    compiled = compiled_select(plan.per_shard, dialect, params)
    if compiled is None:
        return None
    sql, values, names, processors = compiled
    raws: list[Any] = []
    answers: list[list[tuple[Any, ...]] | None]
    failures: dict[int, Exception] = {}
    if any(held[s].dialect.driver != dialect.driver for s in shards if s in held):
        return None
    if any(s not in held and not _idle_connection(engines[s]) for s in shards):
        # A shard with no idle pooled connection would be connected to from this
        # thread, where a server that accepts and never answers holds it past the
        # deadline: the pool threads connect, under it, naming the shard.
        return None
    drivers: list[Any] = []
    try:
        for shard in shards:
            if shard in held:
                drivers.append(held[shard].connection.driver_connection)
                if not pgmux.available(drivers[-1], in_transaction=True):
                    return None
            else:
                raws.append(engines[shard].raw_connection())
                drivers.append(raws[-1].driver_connection)
                if not pgmux.available(drivers[-1]):
                    return None
        query = pgmux.bind(drivers[0], sql, values)
        answers = pgmux.fetch_at_once(
            drivers, query, timeout=timeout, names=shards, failures=failures
        )
    except FanOutTimeoutError as late:
        for shard in late.shards:
            if shard in held:
                held[shard].invalidate()  # the session's transaction ends with an error
        for raw, shard in zip(raws, [s for s in shards if s not in held], strict=False):
            if shard in late.shards:
                raw.invalidate()  # a query may still run there: never reuse it
        raise
    except Exception:  # a broken connection (a server restarted): the usual way instead
        for raw in raws:
            raw.invalidate()
        return None
    finally:
        for raw in raws:
            raw.close()  # back to its pool (an invalidated one is discarded)
    for position, error in sorted(failures.items()):
        if shards[position] in held:  # its transaction is aborted: no second try there
            raise DBAPIError.instance(sql, values, error, Exception, dialect=dialect)
    if any(rows is None for rows in answers):
        return None  # an error there: the usual way raises it as SQLAlchemy's
    process = any(processors)
    return [
        (names, [(shard, _processed(row, processors) if process else row) for row in rows or ()])
        for shard, rows in zip(shards, answers, strict=True)
    ]


def _left(timeout: float | None, started: float) -> float | None:
    """What is left of ``timeout`` seconds from ``started`` (``time.monotonic()``)."""
    return None if timeout is None else max(0.0, timeout - (time.monotonic() - started))


def _idle_connection(engine: Any) -> bool:
    """Whether ``engine``'s pool holds a connection checked in (none to connect)."""
    checkedin = getattr(engine.pool, "checkedin", None)
    return bool(checkedin is not None and checkedin() > 0)


def _processed(row: tuple[Any, ...], processors: list[Any]) -> tuple[Any, ...]:
    return tuple(
        value if process is None else process(value)
        for value, process in zip(row, processors, strict=True)
    )


def _at(position: int) -> Callable[[tuple[str, tuple[Any, ...]]], Any]:
    return lambda pair: pair[1][position]


def _merged(
    session: ShardedSessionBase, plan: FanOutPlan, results: list[Result[Any]], shards: list[str]
) -> Result[Any]:
    dialects = [session.get_bind(shard_id=s).dialect.name for s in shards]

    def run_sql(sql: str, values: dict[str, Any]) -> list[Any]:
        bind = {"shard_id": shards[0]}
        return [tuple(row) for row in session.execute(text(sql), values, bind_arguments=bind)]

    ranker = text_ranker(plan, shards[0], dialects[0], run_sql) if shards else None
    return plan.merge(results, dialects, ranker)


def _streams(statement: Any, options: Mapping[str, Any]) -> bool:
    """Whether the caller asked for rows as a stream (``yield_per``/``stream_results``,
    on the call or on the statement)."""
    asked = {**statement.get_execution_options(), **options}
    return bool(asked.get("yield_per") or asked.get("stream_results"))


def _stream(
    session: ShardedSessionBase,
    plan: FanOutPlan,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    shards: list[str],
) -> Result[Any] | None:
    """The fan-out as a stream (``ops.streams``): each shard's result read lazily (a
    server-side cursor where the driver has one, ``yield_per`` rows at a time), merged
    holding one row per shard; None when a text key's collation does not rank strings
    as code points, which only the whole-result merge can repeat.

    The shards are read from this thread. Rows of columns come from connections of the
    fan-out's own (released when the stream ends or its result is closed); objects
    through the session, for its identity map, on the session's connections.
    """
    if not shards:
        return None
    dialects = [session.get_bind(shard_id=s).dialect.name for s in shards]

    def run_sql(sql: str, values: dict[str, Any]) -> list[Any]:
        bind = {"shard_id": shards[0]}
        return [tuple(row) for row in session.execute(text(sql), values, bind_arguments=bind)]

    ranker = text_ranker(plan, shards[0], dialects[0], run_sql)
    text_keys = {
        key.name
        for key, column in zip(plan.sort, plan.columns, strict=True)
        if isinstance(getattr(column, "type", None), String)
    }
    for key in plan.sort:
        if key.name in text_keys and not streams.text_streams(key, ranker):
            return None
    opened = ExitStack()
    if _in_parallel(session, plan.per_shard) and not _selects_objects(plan.per_shard):
        engines = [session.get_bind(shard_id=s, clause=plan.per_shard) for s in shards]
        options = {**options, "stream_results": True}
        connections = [opened.enter_context(engine.connect()) for engine in engines]
        results = [
            c.execute(plan.per_shard, params, execution_options=options) for c in connections
        ]
    else:
        results = [
            session.execute(
                plan.per_shard, params, execution_options=options, bind_arguments={"shard_id": s}
            )
            for s in shards
        ]
    for result in results:
        opened.callback(result.close)
    parts = [stream_rows(result) for result in results]
    rows: Iterator[Any] = streams.merge_streams(parts, plan.sort, dialects, text_keys=text_keys)
    if plan.window is not None:
        offset, limit = plan.window
        rows = islice(rows, offset, None if limit is None else offset + limit)
    merged = streamed_result(results[0], _closing(rows, opened))
    size = options.get("yield_per") or plan.per_shard.get_execution_options().get("yield_per")
    return merged.yield_per(size) if size else merged


def _closing(rows: Iterator[Any], opened: ExitStack) -> Iterator[Any]:
    """``rows``, then the shards' results and connections closed (also when the
    stream is dropped before its end)."""
    with opened:
        yield from rows


def _read(
    engine: Any,
    statement: Any,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    objects: bool = False,
) -> Result[Any]:
    """The statement's rows on a connection of ``engine`` that the fan-out's deadline can
    cut (its socket is shut down from the waiting thread); ``objects``: loaded by a
    session of the call's own, detached, for the caller to merge into its session."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            # One statement needs no transaction of its own: without one, the read is
            # one round trip, not BEGIN, the SELECT and the ROLLBACK of its return to
            # the pool (psycopg's autocommit is a client-side switch, no round trip).
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        return _read_on(connection, statement, params, options, objects)


def _read_on(
    connection: Connection,
    statement: Any,
    params: Mapping[str, Any] | None,
    options: dict[str, Any],
    objects: bool = False,
) -> Result[Any]:
    """``_read`` on a connection given: one of the fan-out's own, or the one the
    session's transaction holds to a shard, from the calling thread (the only one that
    may use it), so the read sees that transaction. The rows are read (frozen) before
    the connection goes back to its pool."""
    raw = connection.connection.dbapi_connection
    parallel.on_timeout(lambda: dbapi.interrupt(raw))
    if objects:
        with Session(bind=connection) as reader:  # joins the transaction, ends nothing
            return reader.execute(statement, params, execution_options=options).freeze()()
    rows: Result[Any] = connection.execute(statement, params, execution_options=options)
    return rows.freeze()()


def _held(shards: Sequence[str], held: Mapping[str, Connection]) -> list[int]:
    """The positions of ``shards`` whose connection the session's transaction holds."""
    return [i for i, shard in enumerate(shards) if shard in held]


def _selects_objects(statement: Any) -> bool:
    """Whether ``statement`` selects mapped objects (``select(Order)``)."""
    descriptions = getattr(statement, "column_descriptions", None) or []
    return any(d.get("expr") is d.get("type") and d.get("entity") for d in descriptions)


def _in_parallel(session: ShardedSessionBase, statement: Any) -> bool:
    """Whether a fan-out may run on connections of its own, one per shard at once.

    Only server databases (not SQLite). Only for a session with no ``do_orm_execute``
    hooks (they see only what the session executes), and no changes waiting for a
    flush. A shard whose connection the session's transaction holds (whatever it
    wrote or read there, a flush, ``bulk_insert``, SQL on ``session.connection()``, a
    snapshot, is seen only through it) is read on that connection, from this thread,
    while the other shards are read at the same time (``_held``).
    Objects are loaded by a session of each call's own and the rows kept merged into
    this session (``merge_frozen_result``, no SQL), so only a statement with no loader
    options (``selectinload`` would load relations there, not here).
    """
    if session.new or session.dirty or session.deleted:
        return False  # what a flush would write first is seen only through the session
    if has_statement_hooks(session):
        # The session's own hooks (``with_loader_criteria`` filters, a soft-delete rule)
        # run only for statements it executes itself: the per-shard reads stay its own.
        return False
    vendors = [e.dialect.name for e in session.shard_engines().values()]
    if not parallel.may_run_at_once(vendors, holds_shard_work=False):  # held: above
        return False
    return not (_selects_objects(statement) and has_options(statement))
