"""Every private SQLAlchemy API the adapter reads, in one place.

SQLAlchemy keeps a SELECT's clauses in underscore attributes (``_order_by_clauses``,
``_limit_clause`` ...) and a frozen result's rows in ``FrozenResult.data``. They have been
stable across 2.0 and 2.1, but they are not public: when a release changes them, this is
the one module to fix, and ``tests/sqlalchemy/test_compat.py`` is the test that says so.
The greenlet bridge of the asyncio extension (``greenlet_spawn`` runs sync code whose
drivers await; ``await_only`` waits for a coroutine from inside it; 2.1 also names it
``await_``) is imported from here too: ``sqlalchemy.util`` is not documented API; so is
``instance_state`` (``inspect(obj)`` without the inspection registry's dispatch, for
hooks that run for every object built). A legacy ``Query``'s ``get()`` arguments
(``legacy_get_arguments``) are read from its underscore attributes, as ``Query._get_impl``
reads them, and ``SHARD_ID_OPTION`` is the execution option ``ShardedQuery.set_shard()``
sets. ``ShardedSession``'s own chooser (``choose_shard_and_assign``), whether a session is
flushing (``is_flushing``) and an element without its ORM annotations (``deannotated``)
are reached here too.

The names are listed by the class that has them (``PRIVATE_SELECT_API`` ...;
``PRIVATE_API`` is all of them) and the test checks each exists; it also reads the
adapter's source and fails on a private SQLAlchemy name reached outside this module.
``Row._mapping`` (``DOCUMENTED_UNDERSCORE_API``) is public API: SQLAlchemy documents it
and names it so to stay clear of column names.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select
from sqlalchemy.engine import FrozenResult, IteratorResult, Result
from sqlalchemy.engine.result import SimpleResultMetaData
from sqlalchemy.ext.horizontal_shard import ShardedSession, execute_and_instances
from sqlalchemy.orm import (
    Mapper,
    Query,
    Session,
    make_transient_to_detached,
    merge_frozen_result,
)
from sqlalchemy.orm.attributes import instance_state, set_committed_value
from sqlalchemy.sql.elements import _label_reference, _textual_label_reference
from sqlalchemy.util import await_only, greenlet_spawn

__all__ = [
    "DOCUMENTED_UNDERSCORE_API",
    "PRIVATE_API",
    "SHARD_ID_OPTION",
    "STATEMENT_EVENTS",
    "SelectParts",
    "await_only",
    "compiled_select",
    "frozen_rows",
    "greenlet_spawn",
    "has_options",
    "has_statement_hooks",
    "instance_state",
    "into_session",
    "is_plain_select",
    "joined_relationships",
    "label_reference",
    "last_statement_hook",
    "legacy_get_arguments",
    "loaded_object",
    "object_result",
    "observed",
    "result_keys",
    "result_of",
    "rows_result",
    "select_parts",
    "start_shard_binds",
    "stream_rows",
    "streamed_result",
    "without_having",
    "without_loader_options",
]


#: ``Select`` attributes the fan-out reads (its clauses) or calls (``_generate``, a copy).
PRIVATE_SELECT_API = (
    "_order_by_clauses",
    "_group_by_clauses",
    "_distinct",
    "_distinct_on",
    "_limit",
    "_offset",
    "_limit_clause",
    "_offset_clause",
    "_fetch_clause",
    "_fetch_clause_options",
    "_having_criteria",
    "_for_update_arg",
    "_independent_ctes",
    "_prefixes",
    "_correlate",
    "_auto_correlate",
    "_with_options",
    "_generate",
)

#: Legacy ``Query`` attributes and methods ``legacy_get_arguments`` reads, as ``get()``.
PRIVATE_QUERY_API = (
    "_no_criterion_assertion",
    "_only_full_mapper_zero",
    "_with_options",
    "_for_update_arg",
    "_execution_options",
)

#: ``Query.load_options`` attributes.
PRIVATE_LOAD_OPTIONS_API = ("_populate_existing",)

#: A compiled SELECT's attributes (its result columns, its bind processors).
PRIVATE_COMPILED_API = ("_result_columns", "_bind_processors")

#: ``TypeEngine`` methods (a type's result processor, as the compiled result uses it).
PRIVATE_TYPE_API = ("_cached_result_processor",)

#: ``Result`` attributes a streamed or assembled result reads and sets.
PRIVATE_RESULT_API = (
    "_source_supports_scalars",
    "_raw_row_iterator",
    "_metadata",
    "_attributes",
)

#: Result metadata methods (the metadata a frozen result keeps).
PRIVATE_RESULT_METADATA_API = ("_for_freeze",)

#: ``Session`` attributes (whether it is inside ``flush()``).
PRIVATE_SESSION_API = ("_flushing",)

#: ``ShardedSession`` methods the sharded session calls (its own shard chooser, which
#: also sets the instance's identity token).
PRIVATE_SHARDED_SESSION_API = ("_choose_shard_and_assign",)

#: The attribute ``ShardedSession.__init__`` keeps each shard's bind in (its private
#: ``__shards``), set by ``start_shard_binds``.
SHARD_BINDS = "_ShardedSession__shards"

#: ``ShardedSession`` instance attributes.
PRIVATE_SHARDED_SESSION_INSTANCE_API = (SHARD_BINDS,)

#: The attribute of an event's dispatcher (on an instance without listeners of its own)
#: that is its class's list of listeners, kept by SQLAlchemy and added to in place.
CLASS_LISTENERS = "parent_listeners"

#: ``ClauseElement`` methods (a column without its ORM annotations).
PRIVATE_ELEMENT_API = ("_deannotate",)

#: Every private name on the lists above.
PRIVATE_API = (
    PRIVATE_SELECT_API
    + PRIVATE_QUERY_API
    + PRIVATE_LOAD_OPTIONS_API
    + PRIVATE_COMPILED_API
    + PRIVATE_TYPE_API
    + PRIVATE_SHARDED_SESSION_INSTANCE_API
    + PRIVATE_RESULT_API
    + PRIVATE_RESULT_METADATA_API
    + PRIVATE_SESSION_API
    + PRIVATE_SHARDED_SESSION_API
    + PRIVATE_ELEMENT_API
)

#: Underscore names SQLAlchemy documents as API (``Row._mapping``).
DOCUMENTED_UNDERSCORE_API = ("_mapping",)


def choose_shard_and_assign(session: Any, mapper: Any, instance: Any, **kw: Any) -> Any:
    """The shard ``ShardedSession`` picks for ``instance`` (its ``shard_chooser``), set
    as the instance's identity token, as the session does before a flush."""
    return session._choose_shard_and_assign(mapper, instance, **kw)


def is_flushing(session: Session) -> bool:
    """Whether ``session`` is inside ``flush()``."""
    return bool(getattr(session, "_flushing", False))


def deannotated(element: Any) -> Any:
    """``element`` without its ORM annotations (the same Table for every mention)."""
    deannotate = getattr(element, "_deannotate", None)
    return deannotate() if deannotate is not None else element


@dataclass(frozen=True)
class SelectParts:
    """What a fan-out must know of a SELECT before it runs it on every shard."""

    order_by: list[Any]
    group_by: list[Any]
    distinct: bool
    limit: int | None
    offset: int | None
    has_window: bool  # a LIMIT or OFFSET clause, literal or bound
    having: list[Any] = field(default_factory=list)
    for_update: bool = False
    distinct_on: bool = False
    fetch: dict[str, Any] | None = None  # FETCH FIRST's options (with_ties, percent)
    ctes: bool = False  # a WITH clause of its own
    prefixes: bool = False  # SELECT prefixes (``SQL_CALC_FOUND_ROWS``, hints)
    correlate: tuple[Any, ...] | None = None  # explicit correlate(); None: automatic
    auto_correlate: bool = True
    loader_options: tuple[Any, ...] = ()


def select_parts(statement: Select[Any]) -> SelectParts:
    fetch = statement._fetch_clause
    return SelectParts(
        order_by=list(statement._order_by_clauses),
        group_by=list(statement._group_by_clauses),
        distinct=bool(statement._distinct),
        limit=statement._limit,
        offset=statement._offset,
        has_window=statement._limit_clause is not None or statement._offset_clause is not None,
        having=list(statement._having_criteria),
        for_update=statement._for_update_arg is not None,
        distinct_on=bool(statement._distinct_on),
        fetch=None if fetch is None else dict(statement._fetch_clause_options or {}),
        ctes=bool(statement._independent_ctes),
        prefixes=bool(statement._prefixes),
        correlate=tuple(statement._correlate) if statement._correlate else None,
        auto_correlate=bool(statement._auto_correlate),
        loader_options=tuple(statement._with_options),
    )


def without_having(statement: Select[Any]) -> Select[Any]:
    """``statement`` with no HAVING (a fan-out applies it after the merge)."""
    copy = statement._generate()
    copy._having_criteria = ()
    return copy


def without_loader_options(statement: Select[Any]) -> Select[Any]:
    """``statement`` with no loader options: its FROM list as written, without the joins
    and subqueries that eager loading adds when the ORM compiles it."""
    copy = statement._generate()
    copy._with_options = ()
    return copy


def joined_relationships(statement: Select[Any]) -> list[Any]:
    """The relationships ``statement``'s options load with ``joinedload`` (their
    ``RelationshipProperty``), at any depth of the option's path."""
    found = []
    for option in statement._with_options:
        for element in getattr(option, "context", ()):
            strategy = dict(getattr(element, "strategy", None) or ())
            if strategy.get("lazy") != "joined":
                continue
            for step in element.path.path:
                if getattr(step, "is_property", False) and hasattr(step, "local_remote_pairs"):
                    found.append(step)
    return found


def label_reference(element: Any) -> str | None:
    """The label an ``order_by("name")`` / ``order_by(desc("name"))`` names, else None."""
    if isinstance(element, (_label_reference, _textual_label_reference)):
        inner = element.element
        return str(getattr(inner, "text", None) or getattr(inner, "name", None) or inner)
    return None


def result_keys(statement: Select[Any], dialect: Any) -> list[str]:
    """The keys a result of ``statement`` has on ``dialect`` (``count_1`` for an unnamed
    ``count()``), for a result a fan-out assembles itself."""
    compiled = statement.compile(dialect=dialect)
    return [column[0] for column in compiled._result_columns]


def rows_result(keys: list[str], rows: list[tuple[Any, ...]]) -> Result[Any]:
    """A result of plain rows under ``keys``."""
    return IteratorResult(SimpleResultMetaData(keys), iter(rows))


def is_plain_select(clause: Any) -> bool:
    """A SELECT without ``FOR UPDATE``: one a replica may answer."""
    return isinstance(clause, Select) and clause._for_update_arg is None


#: The execution option ``ShardedQuery.set_shard(shard)`` pins a legacy query's shard with.
SHARD_ID_OPTION = "_sa_shard_id"


def legacy_get_arguments(query: Query[Any]) -> tuple[Mapper[Any], dict[str, Any]]:
    """What a legacy ``query.get(ident)`` asks: the one mapper the query selects, and
    ``Session.get``'s arguments as ``Query._get_impl`` hands them to the session (loader
    options, ``populate_existing``, the lock, execution options). Raises as
    ``Query.get`` does for a query with criteria or of anything but one entity."""
    query._no_criterion_assertion("get", order_by=False, distinct=False)
    mapper = query._only_full_mapper_zero("get")
    return mapper, {
        "options": list(query._with_options),
        "populate_existing": query.load_options._populate_existing,
        "with_for_update": query._for_update_arg,
        "execution_options": dict(query._execution_options),
    }


def has_options(statement: Select[Any]) -> bool:
    """Whether a SELECT carries loader options (``selectinload(...)``, ``defer(...)``)."""
    return bool(statement._with_options)


def frozen_rows(frozen: FrozenResult[Any]) -> list[Any]:
    """The rows a frozen result holds (ORM results of one entity hold the objects)."""
    return list(frozen.data)


def result_of(template: FrozenResult[Any], rows: list[Any]) -> Result[Any]:
    """A result of ``rows`` behind ``template``'s metadata (its columns and entities)."""
    template.data = rows
    return template()


def stream_rows(result: Result[Any]) -> Iterator[Any]:
    """A result's rows read lazily, as a frozen result holds them: the objects of a
    one-entity ORM result, else its (processed) rows."""
    if result._source_supports_scalars:
        return iter(result._raw_row_iterator())
    return iter(result)


def streamed_result(template: Result[Any], rows: Iterator[Any]) -> Result[Any]:
    """A result reading ``rows`` lazily behind ``template``'s metadata, as a frozen
    result is replayed (``FrozenResult.__call__``), without holding the rows."""
    result: IteratorResult[Any] = IteratorResult(template._metadata._for_freeze(), rows)
    result._attributes = template._attributes
    result._source_supports_scalars = template._source_supports_scalars
    return result


def into_session(session: Session, statement: Any, result: Result[Any]) -> Result[Any]:
    """The objects of ``result`` (loaded by another session) merged into ``session``
    with no SQL, as ``merge_frozen_result(..., load=False)`` does (untyped upstream)."""
    merged: FrozenResult[Any] = merge_frozen_result(  # type: ignore[no-untyped-call]
        session, statement, result.freeze(), load=False
    )
    return merged()


def loaded_object(
    session: Session,
    mapper: Mapper[Any],
    attributes: list[tuple[str, int]],
    key_positions: list[int],
    values: tuple[Any, ...],
    token: str,
) -> Any:
    """The object of one row (``values``; ``attributes``: each attribute's position in
    it, ``key_positions`` the primary key's) in ``session``, as if the session had
    loaded it under identity ``token``, with no SQL: the one already in its identity
    map, else one made detached (``make_transient_to_detached``, documented for this)
    and attached."""
    ident = tuple(values[position] for position in key_positions)
    key = mapper.identity_key_from_primary_key(ident, identity_token=token)
    existing = session.identity_map.get(key)
    if existing is not None:
        return existing
    obj = mapper.class_manager.new_instance()
    for name, position in attributes:
        set_committed_value(obj, name, values[position])
    state = instance_state(obj)
    state.identity_token = token
    make_transient_to_detached(obj)
    session.add(obj)
    state.manager.dispatch.load(state, None)  # the ORM's load event, as a query fires it
    return obj


def object_result(name: str, objects: list[Any]) -> Result[Any]:
    """A result of one entity's objects (``.scalars()``, rows of one object named
    ``name``), as ``session.execute(select(Class))`` returns."""
    result: IteratorResult[Any] = IteratorResult(SimpleResultMetaData([name]), iter(objects))
    result._source_supports_scalars = True
    return result


def compiled_select(
    statement: Select[Any], dialect: Any, params: Any
) -> tuple[str, dict[str, Any], list[str], list[Any]] | None:
    """``statement`` compiled for ``dialect`` as the DBAPI would receive it: the SQL
    (expanding parameters rendered), its parameters by name with the types' bind
    processors applied, the result's column names and each column's result processor
    (None: none). None for what this does not repeat (a positional paramstyle, tuple
    parameters)."""
    compiled: Any = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
    if compiled.positional:
        return None
    values = dict(compiled.construct_params(params))
    for name, process in compiled._bind_processors.items():
        if not callable(process):
            return None
        if name in values:
            values[name] = process(values[name])
    entries = compiled._result_columns
    names = [entry.keyname for entry in entries]
    processors = [entry.type._cached_result_processor(dialect, None) for entry in entries]
    return str(compiled.string), values, names, processors


#: The engine events that see each statement executed.
STATEMENT_EVENTS = (
    "before_execute",
    "after_execute",
    "before_cursor_execute",
    "after_cursor_execute",
)


def has_statement_hooks(session: Session) -> bool:
    """Whether ``session`` has ``do_orm_execute`` listeners (a ``with_loader_criteria``
    filter, a soft-delete rule) besides the sharded session's own routing one: they see
    only the statements the session itself executes."""
    return any(
        hook is not execute_and_instances and not getattr(hook, OWN_HOOK, False)
        for hook in session.dispatch.do_orm_execute
    )


#: The attribute that marks the adapter's own ``do_orm_execute`` hooks.
OWN_HOOK = "uid_fields_own_hook"


def last_statement_hook(session: Session) -> Any:
    """The ``do_orm_execute`` listener registered last on ``session``'s class (None if
    none): right after construction, the one that runs last for the session.

    Read without making the session's own dispatcher (which costs more than the rest of
    a sharded session's constructor): SQLAlchemy keeps one list of listeners per class
    and adds to it in place, so the list is looked up once per class and then read.
    """
    cls = type(session)
    hooks = _class_hooks.get(cls)
    if hooks is None:
        hooks = _class_hooks[cls] = _class_listeners(cls)
    return hooks[-1] if hooks else None


def _class_listeners(cls: type[Session]) -> Sequence[Any]:
    """The live list of ``cls``'s ``do_orm_execute`` listeners: what the dispatcher of
    an instance without listeners of its own reads (its ``parent_listeners``)."""
    try:
        probe = cls.__new__(cls)  # no __init__: only its dispatcher is read
        found: Sequence[Any] = getattr(probe.dispatch.do_orm_execute, CLASS_LISTENERS)
    except Exception:  # a class built otherwise: its sessions listen on themselves
        return ()
    return found


_class_hooks: weakref.WeakKeyDictionary[type, Sequence[Any]] = weakref.WeakKeyDictionary()


def start_shard_binds(session: ShardedSession, binds: Mapping[str, Any]) -> None:
    """What ``ShardedSession.__init__`` sets up for ``bind_shard()``: the empty map of
    shard name to bind it keeps in a private attribute; then each of ``binds`` bound.
    (The sharded session runs ``Session.__init__`` itself, past ShardedSession's, whose
    one other step is a ``do_orm_execute`` listener registered on every instance.)"""
    if type(session).bind_shard is ShardedSession.bind_shard:
        setattr(session, SHARD_BINDS, dict(binds))  # what its bind_shard() does, at once
        return
    setattr(session, SHARD_BINDS, {})
    for name, bind in binds.items():
        session.bind_shard(name, bind)


def observed(engine: Any, *, own: int = 0) -> bool:
    """Whether ``engine`` has listeners of its statements (a statement logger, a counter)
    besides ``own`` of the adapter's: a statement sent below SQLAlchemy's execution would
    escape them. (A listener is stored wrapped, so they are counted, not compared.)"""
    count = sum(len(list(getattr(engine.dispatch, name, ()))) for name in STATEMENT_EVENTS)
    return count > own
