"""The read side of the sharded session: ``get()`` by primary key, the legacy
``Query.get()``, ``on_all_shards``, and SELECTs whose criteria name several shards.

``ShardedIdSession`` (``session.py``) answers SQLAlchemy's routing questions; this mixin
answers what routing alone cannot: a follower's ``get()`` (its own id names no shard, so
every shard is asked), a fan-out planned and merged by the core (``fanout``), and a
statement whose criteria confine it to several shards yet need combining (ORDER BY,
LIMIT, DISTINCT, GROUP BY, aggregates), which ShardedSession would hand back shard after
shard. It lives apart from the routing so each can be read on its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Select, inspect, select
from sqlalchemy.engine import Result
from sqlalchemy.exc import LegacyAPIWarning, MultipleResultsFound, NoInspectionAvailable
from sqlalchemy.ext.horizontal_shard import ShardedQuery
from sqlalchemy.orm import Mapper, ORMExecuteState, Session

from .compat import SHARD_ID_OPTION, legacy_get_arguments
from .describe import AGGREGATES, function_name
from .fanout import fan_out, needs_combining
from .fields import field_config
from .pages import warn_deep_offset
from .routing import TableRoute
from .session_base import ShardedSessionBase

__all__ = ["FAN_OUT", "ShardedIdQuery", "ShardedReadsMixin", "selects_aggregates"]

_O = TypeVar("_O", bound=object)

#: Execution option that sends a statement without id criteria to every shard, unmerged
#: (rows of one shard after another), as ShardedSession does: for code that merges itself.
FAN_OUT = "uid_fields_fan_out"


class ShardedIdQuery(ShardedQuery[_O]):
    """The legacy ``session.query(Model)`` of a sharded session.

    ``Query.get()`` goes to ``Session._get_impl`` directly, past the session's ``get()``;
    a follower's (whose id names no shard) is the session's ``get()`` here, so it asks
    every shard as ``session.get()`` does (Flask-SQLAlchemy's ``Model.query.get_or_404``
    calls it). Every other class's is SQLAlchemy's own.
    """

    def get(self, ident: Any) -> _O | None:
        session = self.session
        if isinstance(session, ShardedReadsMixin):
            mapper, kwargs = legacy_get_arguments(self)
            if session._follower_mapper(mapper) is not None:
                warnings.warn(
                    "The Query.get() method is considered legacy as of the 1.x series of "
                    "SQLAlchemy and becomes a legacy construct in 2.0: use Session.get()",
                    LegacyAPIWarning,
                    stacklevel=2,
                )
                found: _O | None = session.get(mapper, ident, **kwargs)
                return found
        return super().get(ident)


class ShardedReadsMixin(ShardedSessionBase):
    """How ``ShardedIdSession`` reads what routing alone does not answer (see the module)."""

    if TYPE_CHECKING:  # routing, defined by ShardedIdSession (session.py)
        fan_out_offset_warning: int | None

        def shard_of(self, instance: Any) -> str: ...
        def _route_of(self, mapper: Mapper[Any]) -> TableRoute | None: ...

    def get(self, entity: type[_O] | Mapper[_O], ident: Any, **kwargs: Any) -> _O | None:
        """``Session.get``: the object of that primary key, or None.

        A primary key given as text is read as its column's type first (the core's rule:
        ``"0384"`` is 384, ``" 384"`` is no id), so the identity map is asked the same key
        the row is stored under; an id no row can have (``-1``, ``"abc"``) finds None, as
        a missing row does, instead of failing in the column type.
        """
        normalized = self._normalized_identity(entity, ident)
        if normalized is _NO_ID:
            return None
        pinned = (
            kwargs.get("identity_token") is not None
            or "shard_id" in (kwargs.get("bind_arguments") or {})
            or SHARD_ID_OPTION in (kwargs.get("execution_options") or {})
        )
        mapper = None if pinned else self._follower_mapper(entity)
        if mapper is not None:
            identity = _identity_tuple(mapper, normalized)
            if identity is not None:
                return self._get_on_every_shard(entity, mapper, normalized, identity, kwargs)
        return super().get(entity, normalized, **kwargs)

    def _follower_mapper(self, entity: Any) -> Mapper[Any] | None:
        """The mapper of ``entity`` when it is a follower whose primary key is a uid id of
        its own that names no shard (it lives with its parent): a ``get()`` by that key
        alone must ask every shard. None for every other class."""
        try:
            mapper: Mapper[Any] = inspect(entity).mapper
        except NoInspectionAvailable:
            return None
        route = self._route_of(mapper)
        if route is None or not route.by_parent:
            return None
        columns = list(mapper.primary_key)
        if any(column is route.column for column in columns):
            return None  # the parent's id is part of the key: get() goes to its shard
        # Only uid ids are unique over the shards; a plain integer key may be on each.
        if not any(field_config(column) is not None for column in columns):
            return None
        return mapper

    def _get_on_every_shard(
        self,
        entity: type[_O] | Mapper[_O],
        mapper: Mapper[Any],
        ident: Any,
        identity: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> _O | None:
        """``get()`` of a follower: the identity map under each shard's token, then one
        SELECT per shard, as ``on_all_shards`` runs them (at once on server databases).

        An object already in the identity map names its shard, which alone is asked
        (``populate_existing``, an expired object). A row found on two shards is a
        placement error: neither is the row the key names, so none is picked.
        """
        shards = self.shard_names
        # Session.get's defaults as AsyncSession.get passes them (identity_token=None,
        # with_for_update=None, ...) are no request: only arguments given count.
        kwargs = {name: value for name, value in kwargs.items() if not _left_unset(value)}
        kwargs.pop("identity_token", None)  # given, the caller pinned a shard: not here
        for shard in shards:
            key = mapper.identity_key_from_primary_key(identity, identity_token=shard)
            if key in self.identity_map:
                return super().get(entity, ident, identity_token=shard, **kwargs)
        if set(kwargs) - {"options", "populate_existing", "execution_options"}:
            # FOR UPDATE must lock in this session's transaction, and bind arguments are
            # the session's: each shard through the session, one after another.
            found: list[_O] = []
            for shard in shards:
                obj = super().get(entity, ident, identity_token=shard, **kwargs)
                if obj is not None:
                    found.append(obj)
        else:
            criteria = [
                column == value for column, value in zip(mapper.primary_key, identity, strict=True)
            ]
            statement = select(mapper).where(*criteria)
            if kwargs.get("options"):
                statement = statement.options(*kwargs["options"])
            options = dict(kwargs.get("execution_options") or {})
            if kwargs.get("populate_existing"):
                options["populate_existing"] = True
            result = self.on_all_shards(statement, execution_options=options)
            found = list(result.scalars())
        if len(found) > 1:
            held = sorted((self.shard_of(obj) for obj in found), key=self.router.order)
            for obj in found:
                self.expunge(obj)
            raise MultipleResultsFound(
                f"{mapper.class_.__name__} {identity if len(identity) > 1 else identity[0]} "
                f"is on {' and '.join(held)}: a row lives on its parent's shard only, so "
                "this is a placement error (a copy left behind by a move or a manual "
                "write); delete the row that is not with its parent"
            )
        return found[0] if found else None

    def _normalized_identity(self, entity: Any, ident: Any) -> Any:
        """``ident`` with each uid-typed value as its column's type; ``_NO_ID`` when one
        is no id, or when the routing column's value names no shard."""
        try:
            mapper = inspect(entity).mapper
        except NoInspectionAvailable:  # not mapped: let Session.get say so
            return ident
        columns = list(mapper.primary_key)
        if isinstance(ident, Mapping):
            keys = {c: mapper.get_property_by_column(c).key for c in columns}
            values = {c: ident[keys[c]] for c in columns if keys[c] in ident}
        else:
            given = ident if isinstance(ident, (tuple, list)) else (ident,)
            values = dict(zip(columns, given, strict=False))
        route = self._route_of(mapper)
        try:
            for column, value in values.items():
                coerce = getattr(column.type, "coerce", None)
                if value is not None and coerce is not None:
                    values[column] = coerce(value)
                if route is not None and not route.by_parent and column is route.column:
                    route.shard_of(values[column])
        except (TypeError, ValueError):
            return _NO_ID
        if isinstance(ident, Mapping):
            return {**ident, **{keys[c]: v for c, v in values.items()}}
        if isinstance(ident, (tuple, list)):
            return type(ident)(values.get(c, v) for c, v in zip(columns, ident, strict=False))
        return values[columns[0]]

    if TYPE_CHECKING:
        # Typed as Session.execute is, by the installed SQLAlchemy: Select[tuple[T]] gives
        # Result[tuple[T]] on 2.0, Select[T] gives Result[T] on 2.1 (both accept the same
        # arguments; bind_arguments is refused at run time: a fan-out runs everywhere).
        on_all_shards = Session.execute
    else:

        def on_all_shards(
            self,
            statement: Any,
            params: Mapping[str, Any] | None = None,
            *,
            execution_options: Mapping[str, Any] | None = None,
            bind_arguments: Mapping[str, Any] | None = None,
        ) -> Result[Any]:
            """Run a SELECT on every shard and merge the answers as one database would.

            Rows come in the statement's ORDER BY (the id by default), LIMIT/OFFSET apply
            to the merged rows; aggregates, GROUP BY, HAVING and DISTINCT are combined by
            the core planner, and what does not decompose raises
            ``UnmergeableQueryError`` before anything runs. Typed as
            ``Session.execute``: ``select(Order)`` gives a ``Result`` whose
            ``.scalars().all()`` is a sequence of ``Order``.
            """
            if bind_arguments:
                raise TypeError(
                    "on_all_shards() runs on every shard: bind_arguments cannot pick one "
                    "(use session.execute(..., bind_arguments={'shard_id': ...}))"
                )
            warn_deep_offset(statement, self.fan_out_offset_warning, len(self.shard_names))
            return fan_out(self, statement, params, dict(execution_options or {}))

    def _combined_over_named_shards(self, state: ORMExecuteState) -> Result[Any] | None:
        """A SELECT whose criteria name several shards (``owner_id IN (a, b)``, ids of
        many shards) and that needs combining (ORDER BY, LIMIT, DISTINCT, GROUP BY,
        aggregates): planned and merged over those shards as ``on_all_shards`` merges
        every shard. ShardedSession would hand back each shard's rows one after another:
        ``LIMIT 3`` would give 3 rows per shard, unordered. None for anything else (it
        runs as routed)."""
        if not state.is_select or state.is_relationship_load or state.lazy_loaded_from:
            return None
        options = state.execution_options
        if state.bind_arguments.get("shard_id") is not None or options.get(FAN_OUT):
            return None
        statement = state.statement
        if not isinstance(statement, Select) or not needs_combining(statement):
            return None
        params = state.parameters if isinstance(state.parameters, Mapping) else {}
        named = self.router.statement_shards(statement, params)
        if named is None or len(named) < 2:
            return None
        shards = sorted(named, key=self.router.order)
        session: Any = self  # a ShardedIdSession: the one class built on this mixin
        return fan_out(session, statement, params, dict(state.local_execution_options), shards)


_NO_ID = object()  # get(): the identity is no id at all


def _left_unset(value: Any) -> bool:
    """A ``Session.get`` argument at its default: None, False or empty (a lock is a
    ``ForUpdateArg``, a clause whose truth is not defined)."""
    if value is None or value is False:
        return True
    return isinstance(value, (Mapping, list, tuple)) and not value


def _identity_tuple(mapper: Mapper[Any], ident: Any) -> tuple[Any, ...] | None:
    """The primary key values of a ``get()`` identity (a value, a tuple, a mapping by
    attribute name) in the mapper's order; None when one is missing or None (left to
    ``Session.get``, which says what is wrong)."""
    columns = list(mapper.primary_key)
    if isinstance(ident, Mapping):
        keys = [mapper.get_property_by_column(c).key for c in columns]
        values = tuple(ident.get(key) for key in keys)
    elif isinstance(ident, (tuple, list)):
        values = tuple(ident)
    else:
        values = (ident,)
    if len(values) != len(columns) or any(value is None for value in values):
        return None
    return values


def selects_aggregates(statement: Any) -> bool:
    """Whether a SELECT selects an aggregate (``count(*)``, ``max(id)``, labelled or not),
    by the fan-out planner's list of aggregates (``describe.AGGREGATES``)."""
    return isinstance(statement, Select) and any(
        function_name(column) in AGGREGATES for column in statement.selected_columns
    )
