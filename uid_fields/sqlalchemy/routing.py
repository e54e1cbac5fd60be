"""Which shard a row, an object or a WHERE clause belongs to.

A table is routed by its uid column (a ``SnowflakeField``, ``ShardedBigIntField`` or
``LocalityUUIDField``, preferring the primary key), or by a foreign key to a table
routed that way (children live with their parent): always the parent when the table
has no uid column, and also when its own ids name no shard (a snowflake child without a
map of its own). Every answer comes from the core's ``uid_fields.placement``. Criteria
route a statement when every row it can match lives on known shards: ``id == x``,
``id IN (...)``, a sharded table's ``shard_key == k``, or a routed foreign key, combined
with AND (intersection) and OR (union); a SELECT that reads only FROM subqueries is
confined as their criteria are. Anything else is unconstrained: a fan-out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import CTE, Alias, CompoundSelect, Join, Select, Subquery, inspect
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import (
    BinaryExpression,
    BindParameter,
    ClauseList,
    ExpressionClauseList,
    Grouping,
)
from sqlalchemy.sql.schema import Column, Table

from ..errors import ConfigurationError
from ..placement import Placement, Route, ShardMap, all_of, any_of
from .fields import FieldConfig, field_config

__all__ = ["Router", "TableRoute"]


# The even spread of a route over a list of shards, shared by every session over them.
_DEFAULT_MAPS: dict[tuple[tuple[str, ...], Route], ShardMap] = {}


def table_of(entity: Any) -> Table:
    """The table of a mapped class (or the table itself)."""
    table = entity if isinstance(entity, Table) else inspect(entity).local_table
    if not isinstance(table, Table):
        raise TypeError(f"{entity!r} is not a table or a mapped class")
    return table


class TableRoute:
    """How the rows of one table are placed: the core placement of its id or its parent's."""

    def __init__(
        self,
        table: Table,
        *,
        column: Column[Any],
        config: FieldConfig,
        placement: Placement,
        by_parent: bool,
        key_column: Column[Any] | None = None,
    ) -> None:
        self.table = table
        self.column = column  # the id column, or the foreign key to the parent's id
        self.config = config  # the uid field the values of ``column`` belong to
        self.placement = placement  # the core's placement of those values
        self.by_parent = by_parent
        self.key_column = key_column  # the shard key column, when it alone routes

    @property
    def shard_map(self) -> ShardMap:
        assert self.placement.shard_map is not None
        return self.placement.shard_map

    def shard_of(self, value: Any) -> str:
        """The shard of a value of ``column`` (an id, or a parent id)."""
        return self.placement.database_of(value)

    def shard_of_key(self, value: Any) -> str:
        """The shard a new row with this shard key goes to."""
        return self.placement.database_for_key(value)

    def shards_for(self, column: Column[Any], value: Any) -> tuple[str, ...] | None:
        """The shards ``column == value`` confines a statement to, or None: one for an
        id, and for a shard key one, or two when its database is closed to new keys."""
        if column is self.column:
            return (self.shard_of(value),)
        if column is self.key_column:
            return self.placement.databases_for_key(value)
        return None

    def __repr__(self) -> str:
        how = "parent" if self.by_parent else "id"
        return f"<TableRoute {self.table.name} by {how} {self.column.key}>"


class Router:
    """Routing decisions for one set of shards, shared by every session over them.

    Each uid column carries its own route (and may carry its own map); ``shard_map`` is
    only the default for columns without one, and a column whose ids it cannot read is
    a ``ConfigurationError`` when the table is first routed, before any statement.

    A table's route is resolved once, under a lock (sessions of several threads share
    one router); a route resolved while a foreign key named a table not in the metadata
    yet is resolved again by the next session (``forget_unsettled``), as it was when
    every session had a router of its own.
    """

    def __init__(
        self,
        shard_names: Sequence[str],
        shard_map: ShardMap | None = None,
        default_shard: str | None = None,
    ) -> None:
        self.shard_names = list(shard_names)
        if not self.shard_names:
            raise ValueError("a sharded session needs at least one shard")
        if shard_map is not None and set(shard_map.databases) != set(self.shard_names):
            raise ValueError(
                f"the shard map places rows on {sorted(shard_map.databases)}, but the "
                f"shards are {sorted(self.shard_names)}"
            )
        if default_shard is not None and default_shard not in self.shard_names:
            raise ValueError(f"default_shard={default_shard!r} is not one of the shards")
        self.shard_map = shard_map
        self.default_shard = default_shard
        self._order = {name: i for i, name in enumerate(self.shard_names)}
        self._routes: dict[Table, TableRoute | None] = {}
        self._unsettled_tables: set[Table] = set()  # routed without a foreign key's table
        self._tables_resolving: set[Table] = set()  # a cycle of foreign keys: no parent
        self._routes_lock = threading.RLock()

    def order(self, shard: str) -> int:
        return self._order[shard]

    def default_map_for(self, config: FieldConfig) -> ShardMap:
        """The session-wide map, or the column's route spread over the session's shards."""
        if self.shard_map is not None:
            return self.shard_map
        key = (tuple(self.shard_names), config.route)
        found = _DEFAULT_MAPS.get(key)
        if found is None:
            found = _DEFAULT_MAPS.setdefault(key, ShardMap(self.shard_names, route=config.route))
        return found

    def placement_for(self, config: FieldConfig) -> Placement:
        placement = config.placement_for(self.default_map_for)
        unknown = set(placement.databases) - set(self.shard_names)
        if unknown:
            raise ConfigurationError(
                f"{config.name}: its shard map places rows on {sorted(unknown)}, which are "
                f"not shards of this session ({self.shard_names})"
            )
        return placement

    def table_route(self, table: Table) -> TableRoute | None:
        try:
            return self._routes[table]  # None too: the table has no route
        except KeyError:
            pass
        with self._routes_lock:
            return self._route_locked(table)[0]

    def forget_unsettled(self) -> None:
        """Resolve again the routes resolved while a foreign key named a table that was
        not in the metadata (a model imported later may be that parent)."""
        if self._unsettled_tables:
            with self._routes_lock:
                for table in self._unsettled_tables:
                    self._routes.pop(table, None)
                self._unsettled_tables.clear()

    def _route_locked(self, table: Table) -> tuple[TableRoute | None, bool]:
        """The route of ``table`` and whether it is settled (every foreign key read)."""
        if table in self._routes:
            return self._routes[table], table not in self._unsettled_tables
        if table in self._tables_resolving:
            return None, True
        self._tables_resolving.add(table)
        try:
            # refused (ConfigurationError): asked again, and refused again, next time
            route, settled = self._resolve(table)
        finally:
            self._tables_resolving.discard(table)
        self._routes[table] = route
        if not settled:
            self._unsettled_tables.add(table)
        return route, settled

    def _parents(self, table: Table) -> tuple[list[tuple[Column[Any], FieldConfig]], bool]:
        """Foreign keys of ``table`` to uid columns of tables routed by their own ids,
        and whether every foreign key (and every such parent's route) could be read."""
        found = []
        settled = True
        for column in table.columns:
            for foreign_key in column.foreign_keys:
                try:
                    target = foreign_key.column
                except Exception:  # the referenced table is not in this metadata
                    settled = False
                    continue
                config = field_config(target)
                if config is None or not isinstance(target.table, Table):
                    continue
                route = None
                if target.table is not table:
                    route, known = self._route_locked(target.table)
                    settled = settled and known
                if route is not None and not route.by_parent and route.column is target:
                    found.append((column, config))
        return found, settled

    def _resolve(self, table: Table) -> tuple[TableRoute | None, bool]:
        own = [c for c in table.columns if field_config(c) is not None]
        own.sort(key=lambda c: not c.primary_key)
        config = field_config(own[0]) if own else None
        parents, settled = self._parents(table)
        if config is not None and not _follows_parent(config, parents):
            placement = self.placement_for(config)
            key_column = None
            if config.shard_key_column is not None and placement.embeds_shard:
                key_column = table.columns.get(config.shard_key_column)
            route = TableRoute(
                table,
                column=own[0],
                config=config,
                placement=placement,
                by_parent=False,
                key_column=key_column,
            )
            return route, settled
        if parents:
            column, parent = parents[0]
            route = TableRoute(
                table,
                column=column,
                config=parent,
                placement=self.placement_for(parent),
                by_parent=True,
            )
            return route, settled
        return None, settled

    # -- criteria --------------------------------------------------------------------
    def column_shards(self, column: Any, value: Any) -> tuple[str, ...] | None:
        """The shards ``column == value`` confines rows to, or None if it does not."""
        for base in getattr(column, "proxy_set", ()):
            if isinstance(base, Column) and isinstance(base.table, Table):
                route = self.table_route(base.table)
                if route is not None:
                    shards = route.shards_for(base, value)
                    if shards is not None:
                        return shards
        return None

    def statement_shards(self, statement: Any, params: Mapping[str, Any]) -> set[str] | None:
        """The shards holding every row ``statement`` can read; None when unconstrained.

        Its WHERE criteria, and for a SELECT those of its FROM subqueries: a subquery's
        rows are only on the shards its own criteria name, so a statement that reads
        nothing but such subqueries (``Query.count()``'s ``SELECT count(*) FROM (SELECT
        ... WHERE owner_id = :k)``, Flask-SQLAlchemy's page count) is confined to them.
        One FROM that may hold rows anywhere (a table, a subquery without criteria, the
        outer side of an outer join) leaves only the WHERE to confine the statement; a
        WHERE that confines it is the answer (the FROMs would only narrow it).
        """
        where = self.criteria_shards(getattr(statement, "whereclause", None), params)
        if where is not None:
            # The FROMs could only narrow it further, and reading an ORM statement's
            # FROM list runs the ORM's compilation: not for every routed statement.
            return where
        if isinstance(statement, CompoundSelect):
            # UNION, INTERSECT, EXCEPT: every row comes from one of the SELECTs.
            combined = any_of(self.statement_shards(s, params) for s in statement.selects)
            return None if combined is None else set(combined)
        if not isinstance(statement, Select):
            return None
        froms = [self._from_shards(element, params) for element in statement.get_final_froms()]
        if not froms or any(shards is None for shards in froms):
            return None
        confined = all_of(froms)
        return None if confined is None else set(confined)

    def _from_shards(self, element: Any, params: Mapping[str, Any]) -> set[str] | None:
        """The shards every row of one FROM element is on; None for a table (its rows
        may be anywhere) and for anything else this does not know."""
        if isinstance(element, Join):
            sides = [self._from_shards(element.left, params)]
            sides.append(self._from_shards(element.right, params))
            if any(side is None for side in sides):
                return None  # the WHERE may still confine them
            # An inner join's rows have both sides on their shard; an outer join's only
            # one of them, so either side's shards may hold rows.
            combined = any_of(sides) if element.isouter or element.full else all_of(sides)
            return None if combined is None else set(combined)
        while isinstance(element, (Alias, Subquery, CTE)):
            # A named subquery, and the ORM's alias of one (a legacy ``Query``'s
            # ``from_self()``, which ``Query.count()`` uses, wraps it once more).
            element = element.element
        if isinstance(element, (Select, CompoundSelect)):
            return self.statement_shards(element, params)
        return None  # a table, or an alias of one

    def criteria_shards(self, clause: Any, params: Mapping[str, Any]) -> set[str] | None:
        """The shards holding every row ``clause`` can match; None when unconstrained."""
        while isinstance(clause, Grouping):
            clause = clause.element
        if clause is None:
            return None
        if isinstance(clause, (ClauseList, ExpressionClauseList)) and clause.operator in (
            operators.and_,
            operators.or_,
        ):
            parts = [self.criteria_shards(c, params) for c in clause.clauses]
            combine = all_of if clause.operator is operators.and_ else any_of
            combined = combine(parts)  # the core's rule, as Django's Q objects use it
            return None if combined is None else set(combined)
        if isinstance(clause, BinaryExpression):
            if clause.operator is operators.eq:
                for column, other in ((clause.left, clause.right), (clause.right, clause.left)):
                    if isinstance(other, BindParameter):
                        found = self.column_shards(column, _bound_value(other, params))
                        if found is not None:
                            return set(found)
            elif clause.operator is operators.in_op:
                values = _bound_values(clause.right, params)
                if values is not None:
                    each = [self.column_shards(clause.left, v) for v in values]
                    if all(s is not None for s in each):
                        return {shard for shards in each if shards for shard in shards}
        return None


def _follows_parent(config: FieldConfig, parents: list[tuple[Column[Any], FieldConfig]]) -> bool:
    """A child whose own ids name no shard of their own lives with its parent.

    Snowflake, decimal and locality ids of a table that has a foreign key to a sharded
    table, and no map of their own, do not decide the row's database: the parent does,
    so ``order.items`` finds every item on the order's database.
    """
    return bool(parents) and config.shard_map is None and config.kind != "sharded"


def _bound_value(bind: BindParameter[Any], params: Mapping[str, Any]) -> Any:
    # Session.get() passes the primary key in the parameters, not in the statement.
    if bind.key in params:
        return params[bind.key]
    return bind.effective_value


def _bound_values(element: Any, params: Mapping[str, Any]) -> Iterable[Any] | None:
    while isinstance(element, Grouping):
        element = element.element
    if isinstance(element, BindParameter):
        value = _bound_value(element, params)
        if element.expanding and isinstance(value, (list, tuple, set, frozenset)):
            return list(value)
        return None
    if isinstance(element, ClauseList) and all(
        isinstance(c, BindParameter) for c in element.clauses
    ):
        return [_bound_value(c, params) for c in element.clauses if isinstance(c, BindParameter)]
    return None
