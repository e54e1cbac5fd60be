"""The write side of the sharded session: flushes, their connections, and commits.

``ShardedIdSession`` (``session.py``) answers SQLAlchemy's routing questions; this
mixin is what happens when it writes. Before a flush, pending objects are placed on
their shards and put in shard order (so each shard's INSERTs form one batch), ids a
database function makes are fetched in one statement per shard and table, and a row
that would change shards or a many-to-many link between two shards is refused before
anything is written. During it, the write guard checks the rows placed and each
shard's connection is taken in the innermost transaction; at commit, a transaction
over several shards commits by two-phase commit when asked. It lives apart from the
routing so each can be read on its own.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.horizontal_shard import ShardedSession
from sqlalchemy.orm import Mapper, Session
from sqlalchemy.orm.exc import UnmappedColumnError
from sqlalchemy.orm.state import InstanceState

from ..errors import ShardRoutingError, WrongShardError
from ..ops.replicas import Pins
from ..placement import check_id_change, check_key_change, off_shard_writes_allowed
from .compat import choose_shard_and_assign
from .fields import FieldConfig
from .guard import keys_checked
from .routing import Router, TableRoute
from .twophase import commit_two_phase

__all__ = ["ShardedWritesMixin"]


class ShardedWritesMixin(ShardedSession):
    """How ``ShardedIdSession`` flushes and commits (see the module)."""

    if TYPE_CHECKING:  # routing, defined by ShardedIdSession (session.py)
        router: Router
        read_pins: Pins
        two_phase: bool
        on_two_phase_stage: Callable[[str], None] | None
        _engines: dict[str, Engine]
        _begun: dict[str, Connection]
        _flush_shards: set[str]
        _flush_connections: dict[tuple[Any, str], Connection] | None
        _placed_rows: dict[Table, set[tuple[Any, Any]]] | None

        def shard_of(self, instance: Any) -> str: ...
        def _shard_of_state(self, state: InstanceState[Any]) -> str: ...
        def _route_of(self, mapper: Mapper[Any]) -> TableRoute | None: ...
        @staticmethod
        def _shard_key_of(mapper: Mapper[Any], instance: Any, config: FieldConfig) -> Any: ...
        @staticmethod
        def _parent_object(mapper: Mapper[Any], instance: Any, route: TableRoute) -> Any: ...

    def flush(self, objects: Sequence[Any] | None = None) -> None:
        """``Session.flush``, with the write guard told which rows this flush placed
        itself (each id checked against its shard key in ``_before_flush``): it checks
        each INSERTed row's shard but does not place the key of such a row again. Each
        shard's connection is looked up once per flush, not once per row."""
        outer = self._flush_connections is None
        if not outer:
            super().flush(objects)
            return
        self._flush_connections = {}
        self._placed_rows = {}
        try:
            with keys_checked(self._placed_rows):
                super().flush(objects)
        finally:
            self._flush_connections = None
            self._placed_rows = None

    def connection_callable(
        self,
        mapper: Mapper[Any] | None = None,
        instance: Any | None = None,
        shard_id: str | None = None,
        **kw: Any,
    ) -> Connection:
        """The flush's connection to a shard, in the innermost transaction.

        ShardedSession asks the root transaction, so work inside ``begin_nested()`` ran
        with no SAVEPOINT and survived its rollback. The current (nested) transaction
        opens the SAVEPOINT on the shard's connection the first time it is used.
        """
        if shard_id is None:
            shard_id = choose_shard_and_assign(self, mapper, instance)
        trans = self.get_nested_transaction() or self.get_transaction()
        if trans is not None:
            # Asked once per row by the flush: the connection of a (transaction, shard)
            # is looked up once per flush.
            cache = self._flush_connections
            found = None if cache is None else cache.get((trans, shard_id))
            if found is None:
                found = trans.connection(mapper, shard_id=shard_id)
                if cache is not None:
                    cache[(trans, shard_id)] = found
            return found
        return super().connection_callable(mapper, instance, shard_id, **kw)

    # -- the transaction's connections, and two-phase commit --------------------------
    def _track_connection(self, session: Session, transaction: Any, connection: Connection) -> None:
        for name, engine in self._engines.items():
            if engine is connection.engine:
                self._begun[name] = connection

    def _forget_connections(self, session: Session, transaction: Any) -> None:
        if transaction.parent is None:
            self._begun = {}

    def _commit_two_phase(self, session: Session) -> None:
        """Flush, then commit every shard this transaction used by two-phase commit.

        SQLAlchemy's own commit that follows finds each shard's transaction already
        ended by the server. One shard needs no second phase: its COMMIT is atomic.
        """
        if self.in_nested_transaction():
            return
        self.flush()
        if len(self._begun) > 1:
            order = sorted(self._begun, key=self.router.order)
            commit_two_phase(
                {n: self._begun[n] for n in order},
                self._engines,
                on_stage=self.on_two_phase_stage,
            )

    # -- flush ---------------------------------------------------------------------------
    def _before_flush(self, session: Session, flush_context: Any, instances: Any) -> None:
        """Put pending objects in shard order, so each shard's INSERTs form one batch."""
        pending = [inspect(obj) for obj in self.new]
        placed = {state: self._shard_of_state(state) for state in pending}
        self._fetch_database_ids(placed)
        for state, shard in placed.items():
            if state.identity_token is None:
                state.identity_token = shard
        slots = sorted(state.insert_order for state in pending)
        order = sorted(pending, key=lambda s: (self.router.order(placed[s]), s.insert_order))
        for slot, state in zip(slots, order, strict=True):
            state.insert_order = slot
        touched = set(placed.values())
        for obj in self.dirty:
            self._refuse_move(obj)
        for state in _chain(pending, (inspect(obj) for obj in self.dirty)):
            if _has_secondary(state.mapper):
                self._refuse_links_across_shards(state)
        for obj in _chain(self.dirty, self.deleted):
            touched.add(self.shard_of(obj))
        self._flush_shards = touched
        for shard in touched:
            self.read_pins.pin(shard)  # read your writes: not from a replica behind them

    def _fetch_database_ids(self, placed: Mapping[InstanceState[Any], str]) -> None:
        """Ids a database function makes, fetched in one statement per shard and table.

        Left to the column default, each new row is an INSERT ... RETURNING of its own (a
        flush of 1000 rows was 1000 statements); with the ids known, the rows of a shard
        go in one batched INSERT.
        """
        wanted: dict[tuple[str, Any], list[InstanceState[Any]]] = {}
        for state, shard in placed.items():
            route = self._route_of(state.mapper)
            if route is None or route.by_parent or route.config.database_ids is None:
                continue
            key = state.mapper.get_property_by_column(route.column).key
            if state.dict.get(key) is None:
                wanted.setdefault((shard, route), []).append(state)
        for (shard, route), states in wanted.items():
            assert route.config.database_ids is not None
            connection = self.connection(bind_arguments={"shard_id": shard})
            ids = connection.execute(
                route.config.database_ids.batch_query(), {"count": len(states)}
            ).scalars()
            key = states[0].mapper.get_property_by_column(route.column).key
            for state, value in zip(states, ids, strict=True):
                setattr(state.obj(), key, value)

    def _refuse_links_across_shards(self, state: InstanceState[Any]) -> None:
        """A many-to-many row between rows of two databases is refused before the flush.

        Its association row would be stored with one of them, and a load of the other
        side (a JOIN on one database) would never see it: ``order.tags`` would come back
        without the tag that was appended.
        """
        for relationship in state.mapper.relationships:
            if relationship.secondary is None:
                continue
            added = state.attrs[relationship.key].history.added or ()
            if not added:
                continue
            home = self._shard_of_state(state)
            for other in added:
                there = self.shard_of(other)
                if there != home:
                    raise ShardRoutingError(
                        f"{state.mapper.class_.__name__}.{relationship.key}: this "
                        f"many-to-many row would link a row on {home!r} with one on "
                        f"{there!r}; no load could read it back. Link rows of one shard, "
                        "or map the link as a class that lives with one side and reads "
                        "the other by id"
                    )

    def _refuse_move(self, instance: Any) -> None:
        """A stored row whose new id, parent or shard key names another database is refused.

        The UPDATE would run on the row's old database and strand it there, where reads
        by its new id, its new key and its new parent's relationships never look; a move
        is a delete and an insert. The core judges each (``check_id_change``,
        ``check_key_change``): a change that keeps the row on its database is allowed.
        """
        state = inspect(instance)
        if state.key is None:
            return
        mapper = state.mapper
        route = self._route_of(mapper)
        if route is None:
            return
        current = str(state.key[2])
        what = mapper.class_.__name__
        if route.by_parent:
            column_key = mapper.get_property_by_column(route.column).key
            parent = self._parent_object(mapper, instance, route)
            value = _parent_id(parent, route) if parent is not None else None
            if value is None and parent is None:
                value = getattr(instance, column_key)
            if value is not None:
                check_key_change(
                    route.placement, value, current, what=what, name=column_key, by_id=True
                )
            elif (wanted := self.shard_of(parent)) != current and not off_shard_writes_allowed():
                raise WrongShardError(  # a new parent whose id its database will make
                    f"this {what} lives on {current!r}; its new parent lives on {wanted!r}, "
                    "and rows cannot change shards: delete it and create a new one under "
                    "the new parent",
                    database=current,
                    expected=wanted,
                )
            return
        changed = state.attrs[mapper.get_property_by_column(route.column).key].history
        if changed.added and changed.added[0] is not None:
            check_id_change(
                route.placement,
                changed.added[0],
                current,
                old=changed.deleted[0] if changed.deleted else None,
                what=what,
            )
        config = route.config
        key = self._shard_key_of(mapper, instance, config)
        if key is None or route.key_column is None or config.shard_key is None:
            return
        # A key's rows may be on two databases (made before its own closed, and after):
        # either keeps the row found by its key.
        was = state.attrs[config.shard_key].history.deleted
        check_key_change(
            route.placement,
            key,
            current,
            old=was[0] if was else None,
            what=what,
            name=config.shard_key_column or config.shard_key,
        )


def _parent_id(parent: Any, route: TableRoute) -> Any:
    """The id of the parent object a row routed by its parent points at (None until
    its database makes it): the parent's value of the column ``route.column`` names."""
    parent_mapper = inspect(parent).mapper
    for foreign_key in route.column.foreign_keys:
        try:
            prop = parent_mapper.get_property_by_column(foreign_key.column)
        except UnmappedColumnError:  # not a column of this parent
            continue
        return getattr(parent, prop.key)
    return None


_secondaries: weakref.WeakKeyDictionary[Mapper[Any], bool] = weakref.WeakKeyDictionary()


def _has_secondary(mapper: Mapper[Any]) -> bool:
    """Whether ``mapper`` has a many-to-many relationship (its links are checked)."""
    found = _secondaries.get(mapper)
    if found is None:
        found = _secondaries[mapper] = any(r.secondary is not None for r in mapper.relationships)
    return found


def _chain(*groups: Iterable[Any]) -> Iterable[Any]:
    for group in groups:
        yield from group
