"""``sharded_session()``: a ShardedSession whose choosers read the shard from the id.

SQLAlchemy's horizontal sharding asks three questions; the answers here come from the
ids themselves, so no lookup table and no fan-out where the id is known:

- where does this object go? Its id's shard (the id exists from construction on);
- where can this primary key be? Exactly one shard, so ``get()`` probes one identity
  key and runs one SELECT on one engine (a follower's own id names none: its ``get()``
  asks every shard, and a row on two is an error, not a choice);
- where does this statement go? The shards its id criteria name, the parent's shard
  for a lazy load, and every shard otherwise.

A flush sends only consecutive same-shard INSERTs as one batch, so pending objects are
put in shard order first: a flush of N objects over S shards runs S batched INSERTs.
How the session flushes and commits lives in ``session_writes``, the mixin
``ShardedIdSession`` is built on.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from sqlalchemy import Table, event, inspect
from sqlalchemy.engine import Connection, Engine, Result
from sqlalchemy.ext.horizontal_shard import ShardedSession, execute_and_instances
from sqlalchemy.orm import Mapper, ORMExecuteState, sessionmaker
from sqlalchemy.orm.interfaces import MANYTOONE
from sqlalchemy.orm.state import InstanceState
from sqlalchemy.sql.elements import ClauseElement

from .._internal.validate import integer, positive_seconds
from ..errors import ShardRoutingError
from ..ops.pages import DEFAULT_OFFSET_WARNING
from ..ops.parallel import DEFAULT_TIMEOUT_S, check_concurrency
from ..ops.replicas import DEFAULT_PIN_SECONDS, Pins, ReadReplicas
from ..placement import id_for_new_object
from ..placement.shards import ShardMap
from .compat import (
    OWN_HOOK,
    is_flushing,
    is_plain_select,
    last_statement_hook,
    start_shard_binds,
)
from .fields import FieldConfig
from .listeners import made_for, set_made_id
from .routing import TableRoute
from .session_reads import FAN_OUT, ShardedIdQuery, ShardedReadsMixin, selects_aggregates
from .session_setup import shard_setup
from .session_writes import ShardedWritesMixin

#: SQLAlchemy's ShardedSession arguments that this session's routing answers itself
#: (``id_chooser``/``query_chooser`` are their 1.4 names).
CHOOSERS = ("shard_chooser", "identity_chooser", "execute_chooser", "id_chooser", "query_chooser")

_O = TypeVar("_O", bound=object)

# The replicas of a session given none: nothing to choose from, so nothing per session.
_NO_REPLICAS: ReadReplicas[Engine] = ReadReplicas({})

__all__ = [
    "FAN_OUT",
    "ShardedIdQuery",
    "ShardedIdSession",
    "place_on_shard",
    "sharded_session",
    "sharded_sessionmaker",
]


class ShardedIdSession(ShardedReadsMixin, ShardedWritesMixin):
    """A ``ShardedSession`` routed by uid fields; build it with ``sharded_session()``."""

    def __init__(
        self,
        shards: Mapping[str, Engine] | None = None,
        *,
        shard_map: ShardMap | None = None,
        default_shard: str | None = None,
        strict: bool = True,
        two_phase: bool = False,
        replicas: Mapping[str, Sequence[Engine]] | None = None,
        read_your_writes_seconds: float = DEFAULT_PIN_SECONDS,
        fan_out_timeout: float = DEFAULT_TIMEOUT_S,
        fan_out_concurrency: int | None = None,
        fan_out_offset_warning: int | None = DEFAULT_OFFSET_WARNING,
        clock: Callable[[], float] | None = None,
        **kwargs: Any,
    ) -> None:
        if "read_your_writes_s" in kwargs:  # the name of 0.1, one setting has one name now
            warnings.warn(
                "read_your_writes_s= is deprecated: it is read_your_writes_seconds= (the "
                "READ_YOUR_WRITES_SECONDS setting of Django)",
                DeprecationWarning,
                stacklevel=2,
            )
            read_your_writes_seconds = kwargs.pop("read_your_writes_s")
        if kwargs:
            refuse_choosers(kwargs)
        shards = dict(shards or {})
        # The router, write guards and dialect check of these engines: made by the first
        # session over them, shared by every later one (a session per request).
        setup = shard_setup(shards, shard_map, default_shard)
        self.router = setup.router
        #: Engines that may answer reads of each shard, and this session's
        #: read-your-writes pins (``uid_fields.replicas``).
        self.read_replicas: ReadReplicas[Engine] = _NO_REPLICAS
        if replicas:
            unknown = sorted(set(replicas) - set(shards))
            if unknown:
                raise ValueError(f"replicas name databases that are not shards: {unknown}")
            self.read_replicas = ReadReplicas(replicas)
        self.read_pins = Pins(read_your_writes_seconds, clock=clock)
        #: Seconds ``on_all_shards`` waits for every shard (``FanOutTimeoutError`` after).
        self.fan_out_timeout = (
            DEFAULT_TIMEOUT_S
            if fan_out_timeout is DEFAULT_TIMEOUT_S  # the default, valid: not checked again
            else positive_seconds("fan_out_timeout", fan_out_timeout)
        )
        #: Statements a process runs on one shard at once for fan-outs (None: the
        #: pool's default, ``uid_fields.ops.parallel.workers()``).
        self.fan_out_concurrency = (
            None
            if fan_out_concurrency is None
            else check_concurrency("fan_out_concurrency", fan_out_concurrency)
        )
        #: A fan-out with an OFFSET above this warns (``DeepOffsetWarning``), once per
        #: statement shape per process; None never warns.
        self.fan_out_offset_warning = (
            fan_out_offset_warning
            if fan_out_offset_warning is None or fan_out_offset_warning is DEFAULT_OFFSET_WARNING
            else integer("fan_out_offset_warning", fan_out_offset_warning, 0)
        )
        self.strict = strict
        self.two_phase = two_phase
        if two_phase:
            setup.check_two_phase(shards)
        self._engines = shards
        setup.guard(shards, shard_map)
        # ShardedSession.__init__ but for its do_orm_execute listener, which it registers
        # on each instance (more than all of Session() costs): ``_execute_on_shards`` is
        # the same listener, registered once on the class. While no hook is registered on
        # the class after it, it stands where the instance's would (after every hook of
        # the class, before every hook of the instance); otherwise the session listens
        # on itself as ShardedSession does, and the class's does nothing for it.
        super(ShardedSession, self).__init__(
            query_cls=kwargs.pop("query_cls", ShardedIdQuery), **kwargs
        )
        start_shard_binds(self, shards)  # its choosers are this class's methods (below)
        self._routes_on_class = last_statement_hook(self) is _execute_on_shards
        if not self._routes_on_class:
            event.listen(self, "do_orm_execute", execute_and_instances, retval=True)
        self._flush_shards: set[str] = set()
        # (transaction, shard) -> connection, while a flush runs (see connection_callable).
        self._flush_connections: dict[tuple[Any, str], Connection] | None = None
        # Per table, the (id, shard key) of each row this flush placed (see guard).
        self._placed_rows: dict[Table, set[tuple[Any, Any]]] | None = None
        # Shard name -> connection of the root transaction: what a two-phase commit
        # commits, and what a fan-out must read through to see this transaction.
        self._begun: dict[str, Connection] = {}
        #: Called with each stage of a two-phase commit ("prepared", "decided",
        #: "finished"): for metrics, and for tests that stop the process there.
        self.on_two_phase_stage: Callable[[str], None] | None = None
        # The flush, transaction and commit hooks are listened for once, on the class
        # (below): four listen() calls per session cost more than the session itself.

    @property
    def shard_names(self) -> list[str]:
        return list(self.router.shard_names)

    def get_bind(
        self,
        mapper: Any = None,
        *,
        shard_id: str | None = None,
        instance: Any = None,
        clause: Any = None,
        **kw: Any,
    ) -> Any:
        """The shard's engine, or for a read one of its replicas: unless this transaction
        already holds the shard's primary (it wrote there, or locked rows), or a write
        to the shard pinned its reads to the primary a moment ago."""
        if shard_id is not None and self.read_replicas:
            if _is_read(clause):
                replica = self.read_replicas.read_from(
                    shard_id, in_transaction=shard_id in self._begun, pins=self.read_pins
                )
                if replica is not None:
                    return replica
            elif clause is not None:
                self.read_pins.pin(shard_id)
        return super().get_bind(mapper, shard_id=shard_id, instance=instance, clause=clause, **kw)

    def holds_shard_connections(self) -> bool:
        """Whether this session's transaction holds a connection to any shard."""
        return bool(self._begun)

    def held_connections(self) -> dict[str, Connection]:
        """The connection this session's transaction holds to each shard it began on
        (what it wrote or read there is seen only through that connection)."""
        return dict(self._begun)

    def shard_engines(self) -> dict[str, Engine]:
        """The primary engine of each shard, by name."""
        return dict(self._engines)

    # -- objects -------------------------------------------------------------------------
    def shard_of(self, instance: Any) -> str:
        """The shard an object lives on (or will be inserted into); assigns a missing id."""
        return self._shard_of_state(inspect(instance))

    def _shard_of_state(self, state: InstanceState[Any]) -> str:
        if state.key is not None:
            return str(state.key[2])
        if state.identity_token is not None:
            return str(state.identity_token)
        return self._place(state.mapper, state.obj(), state)

    def _route_of(self, mapper: Mapper[Any]) -> TableRoute | None:
        for table in mapper.tables:
            if not isinstance(table, Table):
                continue
            route = self.router.table_route(table)
            if route is not None:
                return route
        return None

    def _place(
        self, mapper: Mapper[Any], instance: Any, state: InstanceState[Any] | None = None
    ) -> str:
        route = self._route_of(mapper)
        if route is None:
            if self.router.default_shard is not None:
                return self.router.default_shard
            raise ShardRoutingError(
                f"{mapper.class_.__name__} has no uid field and no foreign key to one, so "
                "its rows cannot be routed: give it one, or a default_shard"
            )
        key = mapper.get_property_by_column(route.column).key
        value = getattr(instance, key)
        if route.by_parent:
            if value is not None:
                return route.shard_of(value)
            parent = self._parent_object(mapper, instance, route)
            if parent is not None:
                return self.shard_of(parent)
            raise ShardRoutingError(
                f"{mapper.class_.__name__} is routed by its parent ({key}) and has none yet"
            )
        config = route.config
        shard_key = self._shard_key_of(mapper, instance, config)
        if value is not None or config.client_side:
            # The core's rule for a new object: an id the field made before the session's
            # map was known (or for another key) is made again; the caller's id is kept
            # when it agrees with the key and refused when it does not. An id the field
            # made for this very key, by a placement that places keys as the session's
            # does, fits by construction: the key is not placed again.
            placement = route.placement
            if state is None:
                state = inspect(instance)
            made = None if value is None else made_for(state, key, value)
            chosen = id_for_new_object(
                placement,
                value,
                shard_key,
                keyed=config.shard_key is not None,
                ours=made is not None,
                made_for_key=made is not None
                and shard_key is not None
                and made[0] == shard_key
                and made[1] is not None
                and placement.places_keys_as(made[1]),
                database_made=not config.client_side,
                what=mapper.class_.__name__,
                key_name=config.shard_key or "shard key",
            )
            if chosen.made:
                set_made_id(
                    instance,
                    key,
                    chosen.value,
                    shard_key=shard_key,
                    placement=placement,
                    state=state,
                )
            value = chosen.value
            placed = self._placed_rows
            if placed is not None and value is not None and shard_key is not None:
                with suppress(TypeError):  # an unhashable key: the guard checks it in full
                    placed.setdefault(route.column.table, set()).add((value, shard_key))
        if value is not None:
            return route.shard_of(value)
        if shard_key is not None:
            return route.shard_of_key(shard_key)
        raise ShardRoutingError(
            f"{mapper.class_.__name__}.{key} is made by the database and the object has "
            f"no shard key to place it by: set {config.shard_key or 'a shard_key'} or "
            "call place_on_shard(obj, shard) before adding it"
        )

    @staticmethod
    def _shard_key_of(mapper: Mapper[Any], instance: Any, config: FieldConfig) -> Any:
        """The shard key's value, or the id of the parent object it will be synced from."""
        if config.shard_key is None:
            return None
        value = getattr(instance, config.shard_key)
        if value is not None or config.shard_key_column is None:
            return value
        column = mapper.local_table.columns.get(config.shard_key_column)
        found = _parent_through(mapper, instance, column)
        if found is None:
            return None
        parent, remote = found
        return getattr(parent, inspect(parent).mapper.get_property_by_column(remote).key)

    @staticmethod
    def _parent_object(mapper: Mapper[Any], instance: Any, route: TableRoute) -> Any:
        found = _parent_through(mapper, instance, route.column)
        return None if found is None else found[0]

    # -- the three choosers ------------------------------------------------------------
    def _choose_shard(
        self, mapper: Mapper[Any] | None, instance: Any, clause: ClauseElement | None = None
    ) -> str:
        if instance is not None:
            assert mapper is not None
            return self._place(mapper, instance)
        shards = self.router.statement_shards(clause, {})
        if shards is not None and len(shards) == 1:
            return next(iter(shards))
        if is_flushing(self) and len(self._flush_shards) == 1:
            # many-to-many rows: SQLAlchemy names no object, but the flush has one shard
            return next(iter(self._flush_shards))
        if self.router.default_shard is not None:
            return self.router.default_shard
        name = mapper.class_.__name__ if isinstance(mapper, Mapper) else "a statement"
        if is_flushing(self):
            raise ShardRoutingError(
                f"cannot route rows of {name} without an object (many-to-many association "
                f"rows): this flush spans shards {sorted(self._flush_shards)}; flush the "
                "changes of one shard at a time, or map the association table as a class"
            )
        raise ShardRoutingError(
            f"cannot route {name}: no object and no id criteria; pass "
            "bind_arguments={'shard_id': ...} or use set_shard_id()"
        )

    def _choose_identity_shards(
        self,
        mapper: Mapper[Any],
        primary_key: Any,
        *,
        lazy_loaded_from: InstanceState[Any] | None,
        **kw: Any,
    ) -> list[str]:
        route = self._route_of(mapper)
        if route is not None:
            identity = primary_key if isinstance(primary_key, (tuple, list)) else (primary_key,)
            for position, column in enumerate(mapper.primary_key):
                if column is route.column and identity[position] is not None:
                    try:
                        return [route.shard_of(identity[position])]
                    except (TypeError, ValueError):
                        return []  # no id at all: no shard holds it, get() finds None
        if lazy_loaded_from is not None and lazy_loaded_from.key is not None:
            return [str(lazy_loaded_from.key[2])]
        return self.shard_names

    def _choose_execute_shards(self, context: ORMExecuteState) -> list[str]:
        if context.is_select:
            parent = context.lazy_loaded_from
            if parent is not None and parent.key is not None:
                # A lazy load names the rows it wants: a many-to-one target is found by
                # its own id (it may live elsewhere); otherwise the parent's shard.
                params = context.parameters if isinstance(context.parameters, Mapping) else {}
                named = self.router.statement_shards(context.statement, params)
                if named:
                    return sorted(named, key=self.router.order)
                return [str(parent.key[2])]
        if context.is_insert:
            raise ShardRoutingError(
                "ORM INSERT statements cannot be routed by a ShardedSession; use "
                "uid_fields.sqlalchemy.bulk_insert(session, Model, rows), which groups "
                "the rows by shard"
            )
        params = context.parameters if isinstance(context.parameters, Mapping) else {}
        shards = self.router.statement_shards(context.statement, params)
        if shards is None:
            if self.router.default_shard is not None and not any(
                self._route_of(m) for m in context.all_mappers
            ):
                return [self.router.default_shard]
            if context.execution_options.get(FAN_OUT) or not self.strict:
                return self.shard_names  # asked for: the shards' rows, one after another
            raise ShardRoutingError(
                "this statement names no shard (no id or shard-key criteria), and running "
                "it on one shard or on all of them unmerged would give a wrong answer: "
                "filter by id or shard key, pick a shard with "
                "bind_arguments={'shard_id': ...}, or fan out with "
                "session.on_all_shards(statement), which merges counts, ORDER BY and LIMIT"
            )
        if not shards:  # contradictory criteria match nothing: any one shard says so
            return self.shard_names[:1]
        if (
            len(shards) > 1
            and self.strict
            and not context.execution_options.get(FAN_OUT)
            and selects_aggregates(context.statement)
        ):
            # Each shard would answer with its own count: ShardedSession hands them back
            # one after another, and .scalar() (Query.count(), a paginate() total)
            # would read the first shard's as the answer.
            raise ShardRoutingError(
                f"this aggregate reads rows of {len(shards)} shards "
                f"({', '.join(sorted(shards, key=self.router.order))}), and each would "
                "answer with its own rows' value, one after another: fan out with "
                "session.on_all_shards(statement), which adds counts and sums up and "
                "combines min() and max(), or ask one shard at a time"
            )
        return sorted(shards, key=self.router.order)

    # ShardedSession's three choosers, as methods of the class: set on each instance, as
    # ShardedSession.__init__ sets them, each session would hold bound methods of itself
    # (a reference cycle, freed only by the garbage collector).
    shard_chooser = _choose_shard
    identity_chooser = _choose_identity_shards
    execute_chooser = _choose_execute_shards


# Hooks of every ShardedIdSession, registered once for the class rather than per
# instance (per-instance listeners made sharded_session() 3.6x Session()).
@event.listens_for(ShardedIdSession, "do_orm_execute")
def _combine_named_shards(state: ORMExecuteState) -> Result[Any] | None:
    session = state.session
    if isinstance(session, ShardedIdSession):
        return session._combined_over_named_shards(state)
    return None


setattr(_combine_named_shards, OWN_HOOK, True)  # not a user's hook (compat.has_statement_hooks)


@event.listens_for(ShardedIdSession, "do_orm_execute", retval=True)
def _execute_on_shards(state: ORMExecuteState) -> Result[Any] | None:
    """ShardedSession's own listener (each shard chosen runs the statement, the results
    are merged), for every session that did not register it on itself (see __init__)."""
    session = state.session
    if isinstance(session, ShardedIdSession) and session._routes_on_class:
        return execute_and_instances(state)
    return None


setattr(_execute_on_shards, OWN_HOOK, True)


@event.listens_for(ShardedIdSession, "before_flush")
def _before_flush(session: ShardedIdSession, flush_context: Any, instances: Any) -> None:
    session._before_flush(session, flush_context, instances)


@event.listens_for(ShardedIdSession, "after_begin")
def _after_begin(session: ShardedIdSession, transaction: Any, connection: Connection) -> None:
    session._track_connection(session, transaction, connection)


@event.listens_for(ShardedIdSession, "after_transaction_end")
def _after_transaction_end(session: ShardedIdSession, transaction: Any) -> None:
    session._forget_connections(session, transaction)


@event.listens_for(ShardedIdSession, "before_commit")
def _before_commit(session: ShardedIdSession) -> None:
    if session.two_phase:
        session._commit_two_phase(session)


def _parent_through(mapper: Mapper[Any], instance: Any, column: Any) -> tuple[Any, Any] | None:
    """The parent object set on a many-to-one whose foreign key is ``column``, and the
    parent's column it points at: ``Item(order=order)`` has no ``order_id`` until the
    flush syncs it, so the parent is asked."""
    state = inspect(instance)
    for relationship in mapper.relationships:
        if relationship.direction is not MANYTOONE:
            continue
        for local, remote in relationship.local_remote_pairs or ():
            if local is column:
                parent = state.dict.get(relationship.key)
                if parent is not None:
                    return parent, remote
    return None


def refuse_choosers(kwargs: Mapping[str, Any]) -> None:
    """TypeError naming SQLAlchemy's chooser arguments, which this session's routing
    replaces (they would otherwise fail inside ShardedSession as "multiple values")."""
    given = [name for name in CHOOSERS if name in kwargs]
    if given:
        raise TypeError(
            f"{', '.join(name + '=' for name in given)} cannot be given to a sharded "
            "session: uid_fields routing replaces SQLAlchemy's choosers (it reads each "
            "row's shard from its id). Pin a statement with bind_arguments={'shard_id': "
            "...} or set_shard_id(), a new object with place_on_shard(obj, shard)"
        )


def _is_read(clause: Any) -> bool:
    """A SELECT that locks nothing (a replica can answer it)."""
    return is_plain_select(clause)


def place_on_shard(instance: Any, shard: str) -> None:
    """Pin a new object to a shard (for database-side ids with no shard key)."""
    state = inspect(instance)
    if state.key is not None:
        raise ValueError("the object is already stored; rows cannot change shards")
    state.identity_token = shard


def sharded_session(
    shards: Mapping[str, Engine],
    *,
    shard_map: ShardMap | None = None,
    default_shard: str | None = None,
    strict: bool = True,
    two_phase: bool = False,
    replicas: Mapping[str, Sequence[Engine]] | None = None,
    read_your_writes_seconds: float = DEFAULT_PIN_SECONDS,
    fan_out_timeout: float = DEFAULT_TIMEOUT_S,
    fan_out_concurrency: int | None = None,
    fan_out_offset_warning: int | None = DEFAULT_OFFSET_WARNING,
    **kwargs: Any,
) -> ShardedIdSession:
    """A session over ``shards`` (name -> engine) that routes every row by its id.

    ``shard_map`` places logical shards on the named databases for every table; without
    it each uid field's natural route is spread evenly over ``shards`` in their order.
    ``default_shard`` holds tables without a uid field. A statement that names no shard
    raises ``ShardRoutingError`` (use ``session.on_all_shards(stmt)``); ``strict=False``
    sends it to every shard unmerged instead, as SQLAlchemy's ShardedSession does.
    ``two_phase=True`` (PostgreSQL shards) commits a transaction that wrote to several
    shards with two-phase commit; ``resolve_prepared(engines)`` finishes what a killed
    process left prepared. ``replicas={"shard_1": [engine]}`` reads a shard's rows from
    its replicas, except in a transaction that holds the shard's primary and for
    ``read_your_writes_seconds`` after this session wrote there. ``fan_out_timeout`` bounds
    every ``on_all_shards`` (``FanOutTimeoutError`` names the shards that did not answer),
    the wait for a turn included; ``fan_out_concurrency`` bounds the statements the
    process runs on one shard at once for fan-outs (each on a connection of the shard's
    engine, returned to its pool after the statement). A fan-out with an OFFSET above
    ``fan_out_offset_warning`` warns once per statement shape (``DeepOffsetWarning``: use
    keyset pages, ``rows_after``). Other arguments go to Session.
    """
    return ShardedIdSession(
        shards,
        shard_map=shard_map,
        default_shard=default_shard,
        strict=strict,
        two_phase=two_phase,
        replicas=replicas,
        read_your_writes_seconds=read_your_writes_seconds,
        fan_out_timeout=fan_out_timeout,
        fan_out_concurrency=fan_out_concurrency,
        fan_out_offset_warning=fan_out_offset_warning,
        **kwargs,
    )


def sharded_sessionmaker(
    shards: Mapping[str, Engine], **kwargs: Any
) -> sessionmaker[ShardedIdSession]:
    """A ``sessionmaker`` of ``ShardedIdSession``: ``Session = sharded_sessionmaker(shards,
    shard_map=...)``, then ``with Session() as session:``. Takes ``sharded_session``'s
    arguments; each session it makes routes by id the same way."""
    refuse_choosers(kwargs)
    return sessionmaker(class_=ShardedIdSession, shards=shards, **kwargs)
