"""A SQLAlchemy SELECT described for the core's fan-out planner (``uid_fields.ops.planner``).

The planner is an allowlist, so this module's job is to say, of every part of the
statement, whether it is known to be computed per shard: plain columns of tables that are
co-located, row-level functions, subqueries whose rows live with the outer row, joins on
a shard key. Everything else is named in ``Statement.refused`` and the core refuses it
before any query runs. Where a construct is supported, the statement's outputs (columns,
aggregates, GROUP BY, HAVING, ORDER BY, LIMIT) are translated into the core's terms, and
``shard_select`` builds what each shard runs for a plan.

Co-location is a placement fact (``routing.Router``): two rows are on one database when
they are joined on columns of the same *placement domain*: a table's own uid and the
foreign keys of the tables routed by it (its children), a shard key that names a parent
and the parent's id, two equal shard keys of one table, and a table's primary key with
itself. Only equalities of the conjunctive (AND) part of a WHERE or ON clause prove it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, String, case, func
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import (
    BinaryExpression,
    BindParameter,
    BooleanClauseList,
    ClauseElement,
    ColumnElement,
    FunctionFilter,
    Grouping,
    Label,
    Over,
    UnaryExpression,
    WithinGroup,
)
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.sql.schema import Table
from sqlalchemy.sql.selectable import (
    Alias,
    CompoundSelect,
    Exists,
    Join,
    ScalarSelect,
    Subquery,
)

from ..ops import planner
from .compat import (
    deannotated,
    joined_relationships,
    label_reference,
    select_parts,
    without_having,
    without_loader_options,
)
from .routing import Router

__all__ = ["AGGREGATES", "Described", "describe", "function_name", "shard_select"]

#: Aggregates (by lower-case name) in any dialect; the planner decides which combine.
AGGREGATES = frozenset(
    {
        "count", "sum", "min", "max", "avg", "total", "bool_and", "bool_or", "every",
        "string_agg", "array_agg", "group_concat", "listagg", "json_agg", "jsonb_agg",
        "json_object_agg", "jsonb_object_agg", "json_group_array", "json_group_object",
        "json_arrayagg", "json_objectagg", "xmlagg", "stddev", "stddev_pop",
        "stddev_samp", "std", "variance", "var_pop", "var_samp", "percentile_cont",
        "percentile_disc", "mode", "median", "bit_and", "bit_or", "bit_xor", "corr",
        "covar_pop", "covar_samp", "any_value", "count_big", "range_agg",
    }
)  # fmt: skip

#: Functions known to compute one value from one row's values (and constants).
ROW_FUNCTIONS = frozenset(
    {
        "abs", "ascii", "btrim", "cast", "ceil", "ceiling", "char_length",
        "character_length", "coalesce", "concat", "concat_ws", "current_date",
        "current_time", "current_timestamp", "date", "date_part", "date_trunc",
        "datetime", "day", "dayofmonth", "dayofweek", "dayofyear", "exp", "extract",
        "floor", "greatest", "hour", "ifnull", "iif", "initcap", "instr", "julianday",
        "least", "left", "length", "ln", "localtime", "localtimestamp", "log", "log10",
        "lower", "lpad", "ltrim", "md5", "minute", "mod", "month", "now", "nullif",
        "octet_length", "position", "power", "quarter", "replace", "reverse", "right",
        "round", "rpad", "rtrim", "second", "sign", "split_part", "sqrt", "strftime",
        "strpos", "substr", "substring", "to_char", "trim", "trunc", "unixepoch",
        "upper", "week", "year", "json_extract", "hex", "timezone",
    }
)  # fmt: skip


@dataclass
class Described:
    """A SELECT in the planner's terms, with what is needed to build its shards' SELECT."""

    statement: planner.Statement
    source: Any  # the Select (or, refused, the compound select)
    expressions: list[ColumnElement[Any]] = field(default_factory=list)  # per output
    arguments: list[ColumnElement[Any] | None] = field(default_factory=list)
    filters: list[ColumnElement[Any] | None] = field(default_factory=list)
    entities: bool = False  # selects ORM entities (objects)


class _Scopes:
    """Which FROM instance a column belongs to, through nested SELECTs, and which
    instances are proven co-located (a union-find over placement-domain equalities)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.parent: dict[tuple[int, Any], tuple[int, Any]] = {}
        self.stack: list[tuple[int, set[Any]]] = []
        self.counter = 0

    def enter(self, froms: Iterable[Any]) -> int:
        self.counter += 1
        instances = {_plain(f) for f in froms}
        self.stack.append((self.counter, instances))
        for instance in instances:
            self.parent.setdefault((self.counter, instance), (self.counter, instance))
        return self.counter

    def leave(self) -> None:
        self.stack.pop()

    def instance_of(self, column: Any) -> tuple[int, Any] | None:
        table = _plain(getattr(column, "table", None))
        for scope, instances in reversed(self.stack):
            if table in instances:
                return (scope, table)
        return None

    def find(self, node: tuple[int, Any]) -> tuple[int, Any]:
        while self.parent[node] != node:
            self.parent[node] = self.parent[self.parent[node]]
            node = self.parent[node]
        return node

    def union(self, a: tuple[int, Any], b: tuple[int, Any]) -> None:
        self.parent[self.find(a)] = self.find(b)

    def domain(self, column: Any) -> tuple[str, Any] | None:
        """The placement domain of a column: equal values of two columns of one domain
        are rows of one database. None for a column that places nothing."""
        table = _plain(getattr(column, "table", None))
        base = table.element if isinstance(table, Alias) else table
        base = _plain(base)
        name = getattr(column, "name", None)
        if not isinstance(base, Table) or name is None:
            return None
        route = self.router.table_route(base)
        if route is None:
            return None
        if name == route.column.name:
            return ("id", id(route.config))
        if route.key_column is not None and name == route.key_column.name:
            parent = route.config.parent_config()
            if parent is not None:
                return ("id", id(parent))
            if route.placement.shard_map is not None and route.placement.shard_map.closed:
                return None  # a key's rows may be on its closed database and its new one
            return ("key", id(route.config))
        keys = list(base.primary_key.columns)
        if len(keys) == 1 and keys[0].name == name:
            return ("row", base)
        return None

    def link(self, left: Any, right: Any) -> None:
        """Record ``left = right`` as a proof of co-location where it is one."""
        a, b = self.instance_of(left), self.instance_of(right)
        if a is None or b is None:
            return
        domain = self.domain(left)
        if domain is not None and domain == self.domain(right):
            self.union(a, b)

    def together(self, scopes: Iterable[int]) -> bool:
        """Whether every instance of ``scopes`` is in one co-located component."""
        wanted = set(scopes)
        roots = {self.find(node) for node in self.parent if node[0] in wanted}
        return len(roots) <= 1


def _plain(element: Any) -> Any:
    """An element without its ORM annotations (the same Table for every mention)."""
    return deannotated(element)


def _unwrap(element: Any) -> Any:
    while isinstance(element, (Label, Grouping)):
        element = element.element
    return element


def function_name(element: Any) -> str | None:
    element = _unwrap(element)
    if isinstance(element, FunctionFilter):
        element = element.func
    if isinstance(element, FunctionElement):
        return str(element.name).lower()
    return None


class _Describer:
    def __init__(self, router: Router) -> None:
        self.scopes = _Scopes(router)
        self.refused: list[str] = []

    def refuse(self, what: str) -> None:
        if what not in self.refused:
            self.refused.append(what)

    def colocated_relationship(self, relationship: Any) -> bool:
        """Whether every pair of a relationship's join columns is one placement domain."""
        pairs = list(relationship.local_remote_pairs or ())
        return bool(pairs) and all(
            (domain := self.scopes.domain(local)) is not None
            and domain == self.scopes.domain(remote)
            for local, remote in pairs
        )

    # -- FROM ------------------------------------------------------------------------
    def froms(self, froms: Iterable[Any]) -> list[Any]:
        """The table instances of a FROM list (joins opened, their ON clauses linked)."""
        found: list[Any] = []
        for item in froms:
            found.extend(self._from(item))
        return found

    def _from(self, item: Any) -> list[Any]:
        item = _plain(item)
        if isinstance(item, Join):
            return [*self._from(item.left), *self._from(item.right)]
        if isinstance(item, Table):
            return [item]
        inner = item
        while isinstance(inner, (Subquery, Alias)) and isinstance(
            _plain(inner.element), (Subquery, Alias, Select)
        ):
            inner = _plain(inner.element)  # a subquery, or the ORM's alias of one
        if isinstance(inner, Select):
            self.inline_subquery(inner)
            return [item]
        if isinstance(item, Alias) and isinstance(_plain(item.element), Table):
            return [item]
        if isinstance(item, (Subquery, Alias)) and isinstance(item.element, CompoundSelect):
            self.refuse("a set operation (UNION, INTERSECT, EXCEPT)")
            return [item]
        self.refuse(f"FROM {type(item).__name__}")
        return [item]

    def join_conditions(self, froms: Iterable[Any]) -> Iterator[Any]:
        for item in froms:
            item = _plain(item)
            if isinstance(item, Join):
                yield from self.join_conditions([item.left, item.right])
                if item.onclause is not None:
                    yield item.onclause

    def inline_subquery(self, inner: Select[Any]) -> None:
        """A subquery in FROM runs per shard only if it is a plain filter of co-located
        rows: with LIMIT, DISTINCT, aggregates or GROUP BY its rows depend on all shards."""
        parts = select_parts(inner)
        if parts.limit is not None or parts.offset or parts.has_window or parts.fetch:
            self.refuse("a subquery with LIMIT or OFFSET")
        if parts.distinct or parts.distinct_on:
            self.refuse("a subquery with DISTINCT")
        if parts.group_by or parts.having or self._aggregates(inner.selected_columns):
            self.refuse("a subquery with an aggregate or GROUP BY")
        scope = self.enter_select(inner)
        for column in inner.selected_columns:
            self.expression(column)
        if not self.scopes.together([scope]):
            self.refuse("a join of rows that are not co-located (not joined on their shard key)")
        self.scopes.leave()

    def enter_select(self, select: Select[Any]) -> int:
        """Open a scope for ``select``'s FROM list; its WHERE and ON clauses linked."""
        froms = list(select.get_final_froms())
        parts = select_parts(select)
        outer = set().union(*(instances for _, instances in self.scopes.stack))
        if self.scopes.stack:
            plain = {_plain(f) for f in froms}
            correlated = (
                {_plain(c) for c in parts.correlate}
                if parts.correlate is not None
                else (plain & outer if parts.auto_correlate and plain - outer else set())
            )
            froms = [f for f in froms if _plain(f) not in correlated]
        scope = self.scopes.enter(self.froms(froms))
        for condition in [*self.join_conditions(froms), select.whereclause]:
            if condition is not None:
                self.conjuncts(condition)
                self.expression(condition)
        return scope

    def conjuncts(self, clause: Any) -> None:
        """Link the column equalities of the AND part of ``clause``."""
        clause = _unwrap(clause)
        if isinstance(clause, BooleanClauseList) and clause.operator is operators.and_:
            for part in clause.clauses:
                self.conjuncts(part)
        elif isinstance(clause, BinaryExpression) and clause.operator is operators.eq:
            left, right = _unwrap(clause.left), _unwrap(clause.right)
            if isinstance(left, ColumnElement) and isinstance(right, ColumnElement):
                self.scopes.link(left, right)

    # -- expressions -----------------------------------------------------------------
    def _aggregates(self, columns: Iterable[Any]) -> bool:
        return any(self._has_aggregate(c) for c in columns)

    def _has_aggregate(self, element: Any) -> bool:
        if function_name(element) in AGGREGATES:
            return True
        if isinstance(element, (ScalarSelect, Exists, Select)):
            return False
        return any(self._has_aggregate(child) for child in element.get_children())

    def expression(self, element: Any, *, allow_aggregates: bool = False) -> None:
        """Refuse what in ``element`` is not computed per row; with ``allow_aggregates``
        the element itself may be an aggregate (of row values: none inside it)."""
        element = _unwrap(_plain(element))
        if isinstance(element, Over):
            self.refuse("a window function (OVER)")
            return
        if isinstance(element, WithinGroup):
            self.refuse("an ordered-set aggregate (WITHIN GROUP)")
            return
        if isinstance(element, Exists):
            self.subquery(_select_of(element.element), link=None, kind="EXISTS")
            return
        if isinstance(element, ScalarSelect):
            self.subquery(element.element, link=None, kind="scalar")
            return
        if isinstance(element, (Select, CompoundSelect)):
            self.subquery(element, link=None, kind="scalar")
            return
        if isinstance(element, BinaryExpression) and element.operator in (
            operators.in_op,
            operators.not_in_op,
        ):
            right = _unwrap(element.right)
            if isinstance(right, (ScalarSelect, Select, CompoundSelect)):
                self.expression(element.left)
                inner = right.element if isinstance(right, ScalarSelect) else right
                self.subquery(inner, link=element.left, kind="IN")
                return
        name = function_name(element)
        if name is not None:
            if name in AGGREGATES and not allow_aggregates:
                self.refuse(f"the aggregate {name}() inside an expression")
            elif name not in AGGREGATES and name not in ROW_FUNCTIONS:
                self.refuse(f"the function {name}() (not known to compute per row)")
        if isinstance(element, FunctionFilter):
            children = [*element.func.get_children(), element.criterion]
        else:
            children = list(element.get_children())
        for child in children:
            if isinstance(child, ClauseElement):
                self.expression(child)

    def subquery(self, inner: Any, *, link: Any, kind: str) -> None:
        """A subquery in WHERE or a column: per shard only when its rows live with the
        outer row (IN on one placement domain, or correlated on one), and it has no
        LIMIT, DISTINCT (except under IN and EXISTS) or aggregate over rows of shards."""
        if not isinstance(inner, Select):
            self.refuse("a set operation (UNION, INTERSECT, EXCEPT) in a subquery")
            return
        parts = select_parts(inner)
        if parts.limit is not None or parts.offset or parts.has_window or parts.fetch:
            self.refuse("a subquery with LIMIT or OFFSET")
        if parts.distinct_on or (parts.distinct and kind == "scalar"):
            self.refuse("a subquery with DISTINCT")
        if parts.group_by or parts.having or self._aggregates(inner.selected_columns):
            self.refuse("a subquery with an aggregate or GROUP BY")
        outer_scopes = [scope for scope, _ in self.scopes.stack]
        scope = self.enter_select(inner)
        columns = list(inner.selected_columns)
        for column in columns:
            self.expression(column)
        if link is not None and len(columns) == 1:
            self.scopes.link(_unwrap(link), _unwrap(columns[0]))
        if not self.scopes.together([*outer_scopes[-1:], scope]):
            self.refuse(
                f"a subquery ({kind}) whose rows are not joined to the row by its shard key"
            )
        self.scopes.leave()


def _select_of(element: Any) -> Any:
    element = _unwrap(element)
    return element.element if isinstance(element, ScalarSelect) else element


def describe(statement: Any, router: Router) -> Described:
    """``statement`` in the planner's terms (refused constructs listed, not raised)."""
    describer = _Describer(router)
    if isinstance(statement, CompoundSelect):
        describer.refuse("a set operation (UNION, INTERSECT, EXCEPT)")
        return Described(planner.Statement((), refused=tuple(describer.refused)), statement)
    parts = select_parts(statement)
    if parts.for_update:
        describer.refuse("SELECT ... FOR UPDATE")
    if parts.distinct_on:
        describer.refuse("DISTINCT ON")
    if parts.fetch is not None:
        with_ties = parts.fetch.get("with_ties") or parts.fetch.get("percent")
        describer.refuse("FETCH ... WITH TIES" if with_ties else "FETCH FIRST (use limit())")
    if parts.ctes:
        describer.refuse("a WITH clause (CTE)")
    if parts.prefixes:
        describer.refuse("a SELECT prefix")
    for relationship in joined_relationships(statement):
        if not describer.colocated_relationship(relationship):
            describer.refuse(
                f"joinedload({relationship}) of rows that are not co-located with theirs "
                "(selectinload reads them where they live)"
            )
    scope = describer.enter_select(without_loader_options(statement))
    entities = any(
        d.get("entity") is not None and d.get("expr") is d.get("entity")
        for d in statement.column_descriptions
    )
    described = Described(planner.Statement(()), statement, entities=entities)
    grouped = bool(parts.group_by)
    local = False
    outputs: list[planner.Output] = []
    selected = list(statement.selected_columns)
    for column in selected:
        describer.expression(column, allow_aggregates=True)
        _add_output(described, outputs, column, hidden=False)
    group_by: list[int] | None = None
    if grouped:
        group_by = []
        for clause in parts.group_by:
            describer.expression(clause)
            if describer.scopes.domain(_unwrap(clause)) is not None:
                local = True  # equal keys, one database: each group whole on its shard
            group_by.append(_output_for(described, outputs, clause))
    having = None
    for clause in parts.having:
        term = _condition(described, outputs, clause, describer)
        having = term if having is None else planner.Condition("and", (having, term))
    order: list[planner.Ordering] = []
    aggregated = grouped or any(o.aggregate is not None for o in outputs)
    if aggregated and not local:
        for clause in parts.order_by:
            describer.expression(_order_term(clause)[0], allow_aggregates=True)
            ordering = _ordering(described, outputs, clause)
            if ordering is None:
                describer.refuse(f"ORDER BY {clause} (not a selected column or aggregate)")
            else:
                order.append(ordering)
        if parts.distinct and any(o.hidden for o in outputs):
            describer.refuse("DISTINCT over groups with columns not selected")
    else:
        for clause in parts.order_by:
            describer.expression(_order_term(clause)[0], allow_aggregates=local)
    if not describer.scopes.together([scope]):
        describer.refuse("a join of rows that are not co-located (not joined on their shard key)")
    if local:
        # Every group is whole on one shard: the statement runs as it is there and its
        # groups are rows to merge in the ORDER BY (the adapter's row merge).
        outputs = [replace_aggregate(o) for o in outputs[: len(selected)]]
        group_by, having = None, None
    described.statement = planner.Statement(
        tuple(outputs),
        group_by=tuple(group_by) if group_by is not None else None,
        distinct=parts.distinct and not (aggregated and not local),
        order=tuple(order),
        limit=parts.limit,
        offset=parts.offset or 0,
        having=having,
        refused=tuple(describer.refused),
    )
    return described


def replace_aggregate(output: planner.Output) -> planner.Output:
    """``output`` as a plain value: a group's aggregate computed whole on one shard."""
    return planner.Output(output.name, hidden=output.hidden, text=output.text)


def _add_output(
    described: Described, outputs: list[planner.Output], column: Any, *, hidden: bool
) -> int:
    element = _unwrap(column)
    name = function_name(element)
    argument = criterion = None
    distinct = False
    if name in AGGREGATES:
        function = element.func if isinstance(element, FunctionFilter) else element
        criterion = element.criterion if isinstance(element, FunctionFilter) else None
        clauses = list(function.clauses)
        if len(clauses) == 1:
            argument = _unwrap(clauses[0])
            if isinstance(argument, UnaryExpression) and argument.operator is operators.distinct_op:
                distinct, argument = True, _unwrap(argument.element)
    label = getattr(column, "key", None) or getattr(column, "name", None) or str(element)
    text = isinstance(getattr(column, "type", None), String) and name not in AGGREGATES
    outputs.append(
        planner.Output(
            str(label),
            aggregate=name if name in AGGREGATES else None,
            distinct=distinct,
            hidden=hidden,
            text=text,
        )
    )
    described.expressions.append(column)
    described.arguments.append(argument)
    described.filters.append(criterion)
    return len(outputs) - 1


def _output_for(described: Described, outputs: list[planner.Output], clause: Any) -> int:
    """The output ``clause`` is (a selected column or label), added hidden if none is."""
    named = label_reference(clause)
    for i, expression in enumerate(described.expressions):
        if named is not None and getattr(expression, "key", None) == named:
            return i
        if named is None and (
            _unwrap(expression) is _unwrap(clause) or _unwrap(expression).compare(_unwrap(clause))
        ):
            return i
    if named is not None:
        return -1
    return _add_output(described, outputs, clause, hidden=True)


def _order_term(clause: Any) -> tuple[Any, bool, str | None]:
    """An ORDER BY term's expression, whether descending, and its explicit NULLS."""
    descending, nulls = False, None
    element = clause
    if isinstance(element, UnaryExpression) and element.modifier in (
        operators.nulls_first_op,
        operators.nulls_last_op,
    ):
        nulls = "first" if element.modifier is operators.nulls_first_op else "last"
        element = element.element
    if isinstance(element, UnaryExpression) and element.modifier in (
        operators.desc_op,
        operators.asc_op,
    ):
        descending = element.modifier is operators.desc_op
        element = element.element
    return element, descending, nulls


def _ordering(
    described: Described, outputs: list[planner.Output], clause: Any
) -> planner.Ordering | None:
    element, descending, nulls = _order_term(clause)
    position = _output_for(described, outputs, element)
    if position < 0:
        return None
    return planner.Ordering(position, descending, nulls)  # type: ignore[arg-type]


_COMPARISONS = {
    operators.eq: "=",
    operators.ne: "!=",
    operators.lt: "<",
    operators.le: "<=",
    operators.gt: ">",
    operators.ge: ">=",
    operators.is_: "is null",
}


def _condition(
    described: Described, outputs: list[planner.Output], clause: Any, describer: _Describer
) -> planner.Condition:
    """A HAVING clause as the core evaluates it after the merge; what it cannot say is
    refused (an empty condition is never evaluated: the statement is refused)."""
    clause = _unwrap(clause)
    if isinstance(clause, BooleanClauseList) and clause.operator in (operators.and_, operators.or_):
        op = "and" if clause.operator is operators.and_ else "or"
        terms = tuple(_condition(described, outputs, c, describer) for c in clause.clauses)
        return planner.Condition(op, terms)
    if isinstance(clause, UnaryExpression) and clause.operator is operators.inv:
        return planner.Condition(
            "not", (_condition(described, outputs, clause.element, describer),)
        )
    if isinstance(clause, BinaryExpression) and clause.operator in _COMPARISONS:
        op = _COMPARISONS[clause.operator]
        left = _operand(described, outputs, clause.left, describer)
        if op == "is null":
            return planner.Condition(op, (left,))
        right = _operand(described, outputs, clause.right, describer)
        return planner.Condition(op, (left, right))
    describer.refuse(f"HAVING {clause}")
    return planner.Condition("and", ())


def _operand(
    described: Described, outputs: list[planner.Output], element: Any, describer: _Describer
) -> planner.Operand:
    element = _unwrap(element)
    if isinstance(element, BindParameter):
        return ("value", element.effective_value)
    describer.expression(element, allow_aggregates=True)
    return ("output", _output_for(described, outputs, element))


def shard_select(described: Described, plan: planner.Plan) -> Select[Any]:
    """What each shard runs for an ``aggregate`` or ``groups`` plan: the columns the plan
    names (an AVG as its SUM and COUNT, a DISTINCT aggregate's argument grouped by), no
    ORDER BY, LIMIT, OFFSET or HAVING (they apply after the merge)."""
    columns: list[ColumnElement[Any]] = []
    for position, column in enumerate(plan.columns):
        expression = described.expressions[column.output]
        argument = described.arguments[column.output]
        criterion = described.filters[column.output]
        if column.role == "argument":
            value = argument if criterion is None else case((criterion, argument))
            made: Any = value
        elif described.statement.outputs[column.output].aggregate == "avg":
            function = func.sum(argument) if column.role == "sum" else func.count(argument)
            made = function if criterion is None else function.filter(criterion)
        else:
            made = expression
        columns.append(_unwrap(made).label(f"uidf_{position}"))
    statement = without_having(described.source)
    statement = statement.with_only_columns(*columns, maintain_column_froms=True)
    statement = statement.order_by(None).limit(None).offset(None).group_by(None)
    if plan.kind == "groups":
        statement = statement.group_by(*(columns[i].element for i in plan.group_by))
    return statement
