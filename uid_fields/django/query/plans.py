"""A QuerySet described for the core planner (``uid_fields.ops.planner``), and the
per-shard querysets of a plan.

The adapter only translates: what a Django query selects, groups, orders, slices and
filters after grouping becomes an ORM-neutral ``Statement``; every construct not proven
to decompose over shards is listed in its ``refused`` (a subquery whose rows may be on
other shards, a window, a join of rows that are not co-located, a set operation,
``DISTINCT ON``, ``select_for_update()``, an aggregate that does not combine), so the core
refuses it before any query runs. A plan is then run as querysets of each shard
(``values()``/``annotate()`` on the query's own WHERE and joins) and the rows combined
by ``ops.combine``; AVG is asked as SUM and COUNT per shard and divided with the
database's own arithmetic, then converted as Django converts an Avg.

Plain row fan-outs (model instances, values with their primary key) keep their fast
paths in ``fanout`` and ``query``; every fan-out is vetted first (``vetting.vet``).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, models
from django.db.models import (
    Aggregate,
    Avg,
    Case,
    Count,
    F,
    Max,
    Min,
    OrderBy,
    Sum,
    When,
)
from django.db.models.expressions import Col, Ref
from django.db.models.lookups import Lookup

from ...ops import planner
from ...ops.combine import combine
from ...ops.planner import Condition, Ordering, Output, Statement
from .. import compat
from ..compat import (
    FlatValuesListIterable,
    ModelIterable,
    NamedValuesListIterable,
    ValuesIterable,
    aggregate_argument,
    aggregate_filter,
    all_annotations,
    base_alias,
    converted,
    grouping,
    having_of,
    iterable_class,
    limited,
    limits,
    ordering_request,
    selected_annotations,
    selected_columns,
    selected_names,
    selected_values,
    shard_base,
    with_annotations,
)
from .fanout import _text_ranker, gather
from .vetting import joins_stay_on_the_shard

__all__ = ["aggregate", "planned", "results"]

#: Django's aggregates by class, as the core names them. A subclass (or any other
#: aggregate) is refused by its own name: its per-shard answers are not known to combine.
_AGGREGATES: dict[str, str] = {
    f"{Count.__module__}.{Count.__qualname__}": "count",
    f"{Sum.__module__}.{Sum.__qualname__}": "sum",
    f"{Min.__module__}.{Min.__qualname__}": "min",
    f"{Max.__module__}.{Max.__qualname__}": "max",
    f"{Avg.__module__}.{Avg.__qualname__}": "avg",
    "django.contrib.postgres.aggregates.general.BoolAnd": "bool_and",
    "django.contrib.postgres.aggregates.general.BoolOr": "bool_or",
}

_LOOKUPS = {"exact": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<=", "in": "in"}


def _kind(expression: Any) -> str:
    cls = type(expression)
    return _AGGREGATES.get(f"{cls.__module__}.{cls.__qualname__}", cls.__name__.lower())


# -- which fan-outs the planner answers ---------------------------------------------------


def planned(qs: models.QuerySet[Any]) -> bool:
    """Whether ``qs`` over shards needs the core's merge: groups that may span shards,
    or DISTINCT values without the primary key. Other fan-outs are rows each shard
    answers whole (model instances, values with the key, groups of one row each) and
    take the row paths."""
    group_by = grouping(qs)
    if group_by is not None:
        return not (_groups_by_row(qs) and joins_stay_on_the_shard(qs.query, qs.model))
    if not compat.is_distinct(qs) or issubclass(iterable_class(qs), ModelIterable):
        return False
    names = selected_names(qs)
    pk = qs.model._meta.pk
    return bool(names) and not ({"pk", pk.name, pk.attname} & set(names))


# -- a query described ------------------------------------------------------------------


@dataclass
class _Entry:
    """One output of the statement, as Django names it."""

    name: str
    expression: Any = None  # an annotation (resolved); None: a field name
    aggregate: str | None = None
    hidden: bool = False


@dataclass
class _Described:
    qs: Any
    entries: list[_Entry]
    statement: Statement
    refused: list[str] = field(default_factory=list)
    originals: dict[str, Any] = field(default_factory=dict)  # aggregate()'s, unresolved


def _is_text(expression: Any) -> bool:
    output = getattr(expression, "output_field", None)
    return isinstance(output, (models.CharField, models.TextField))


def _entry(name: str, expression: Any, hidden: bool = False) -> tuple[_Entry, list[str]]:
    """An annotation as an output: a value, or an aggregate the core combines."""
    if not getattr(expression, "contains_aggregate", False):
        return _Entry(name, expression, hidden=hidden), []
    if not isinstance(expression, Aggregate):  # Sum("x") * 2, an aggregate's default=
        why = f"an expression over aggregates ({name})"
        return _Entry(name, expression, why, hidden), [why]
    kind = _kind(expression)
    refused = []
    source = aggregate_argument(expression)
    if kind in ("min", "max") and _is_text(source):
        refused.append(f"{kind}() of text ({name}), compared in the database's collation")
    return _Entry(name, expression, kind, hidden), refused


def _groups_by_row(qs: models.QuerySet[Any]) -> bool:
    """Whether GROUP BY includes the primary key: each group is one row of one shard
    (and, when every table it joins is co-located, ``joins_stay_on_the_shard``,
    complete there: ``annotate(Count("purchases"))`` merges as the shards' rows)."""
    group_by = compat.grouping(qs)
    if group_by is True:
        return True
    pk = qs.model._meta.pk
    return isinstance(group_by, tuple) and any(getattr(e, "target", None) is pk for e in group_by)


def _describe(qs: models.QuerySet[Any], aggregates: dict[str, Any] | None = None) -> _Described:
    refused: list[str] = []
    entries: list[_Entry] = []
    source: Any = qs
    if aggregates is not None:
        source, resolved = with_annotations(qs, aggregates)
        for name, expression in resolved.items():
            made, why = _entry(name, expression)
            entries.append(made)
            refused += why
        group_by: tuple[int, ...] | None = None
    else:
        for name in selected_values(qs):
            entries.append(_Entry(name, None))
        for name, expression in selected_annotations(qs).items():
            made, why = _entry(name, expression)
            entries.append(made)
            refused += why
        if grouping(qs) is not None:
            unselected = _unselected_keys(qs)
            if unselected is None:
                refused.append("GROUP BY an expression that is not selected")
            entries += [_Entry(name, None, hidden=True) for name in unselected or ()]
        keys = tuple(i for i, e in enumerate(entries) if e.aggregate is None)
        group_by = keys if grouping(qs) is not None else None
    grouped = group_by is not None or any(e.aggregate for e in entries)
    if aggregates is None and issubclass(iterable_class(qs), ModelIterable):
        refused.append("model instances of groups or DISTINCT values that span shards")
    having = None
    if aggregates is None and grouped:
        node = having_of(qs)
        if node is not None:
            having = _condition(node, qs, entries, refused)
    order = _ordering(qs, entries, grouped, refused) if aggregates is None else ()
    low, high = limits(qs) if aggregates is None else (0, None)
    outputs = tuple(
        Output(
            e.name,
            e.aggregate,
            distinct=bool(getattr(e.expression, "distinct", False)) and e.aggregate is not None,
            hidden=e.hidden,
            text=_is_text(_text_source(qs, e)),
        )
        for e in entries
    )
    statement = Statement(
        outputs,
        group_by=group_by,
        distinct=compat.is_distinct(qs) and not grouped,
        order=order,
        limit=None if high is None else high - low,
        offset=low,
        having=having,
        refused=tuple(refused),
    )
    return _Described(source, entries, statement, refused, dict(aggregates or {}))


def _text_source(qs: models.QuerySet[Any], entry: _Entry) -> Any:
    """What decides whether an output compares as text: a field's column, an
    annotation's output, a DISTINCT aggregate's argument."""
    if entry.expression is None:
        names = selected_values(qs)
        if entry.name in names:
            return selected_columns(qs)[names.index(entry.name)]
        try:
            return qs.model._meta.get_field(entry.name)
        except Exception:
            return None
    if entry.aggregate is not None:
        return aggregate_argument(entry.expression)
    return entry.expression


def _unselected_keys(qs: models.QuerySet[Any]) -> list[str] | None:
    """The fields of the model the query groups by without selecting them
    (``values("name").annotate(n=...).values("n")``): each shard selects them too, as
    hidden outputs. None when a key is something else (a joined column, an expression)."""
    allowed = list(selected_columns(qs))
    for expression in selected_annotations(qs).values():
        if not getattr(expression, "contains_aggregate", False):
            allowed += list(expression.get_group_by_cols())
    group_by = grouping(qs)
    if not isinstance(group_by, tuple):
        return None
    names = []
    for expression in group_by:
        if expression in allowed:
            continue
        own = isinstance(expression, Col) and expression.alias == base_alias(qs)
        if not own or expression.target.model is not qs.model._meta.concrete_model:
            return None
        names.append(str(expression.target.name))
    return names


def _index(entries: list[_Entry], name: str, model: Any) -> int | None:
    pk = model._meta.pk
    names = {name} | ({"pk", pk.name, pk.attname} if name in ("pk", pk.name, pk.attname) else set())
    for i, entry in enumerate(entries):
        if entry.name in names:
            return i
    return None


def _ordering(
    qs: models.QuerySet[Any], entries: list[_Entry], grouped: bool, refused: list[str]
) -> tuple[Ordering, ...]:
    """The ORDER BY over outputs. Grouped queries ignore ``Meta.ordering`` (as Django
    does); an ungrouped one orders by a field it does not select through a hidden
    output (Django selects it too, so DISTINCT sees it)."""
    items, standard = ordering_request(qs)
    if grouped and not compat.has_order_by(qs):
        items = []
    order = []
    for item in items:
        descending, nulls, name = _order_item(item)
        if name is None:
            refused.append(f"ordering by {item!r} across shards")
            continue
        at = _index(entries, name, qs.model)
        if at is None and not grouped and _is_field(qs.model, name):
            entries.append(_Entry(name, None, hidden=True))
            at = len(entries) - 1
        if at is None:
            refused.append(f"ordering by {name!r}, which the query does not select")
            continue
        if not standard:
            descending = not descending
            nulls = None if nulls is None else ("last" if nulls == "first" else "first")
        order.append(Ordering(at, descending, nulls))  # type: ignore[arg-type]
    return tuple(order)


def _order_item(item: Any) -> tuple[bool, str | None, str | None]:
    descending, nulls = False, None
    expression = item
    if isinstance(item, OrderBy):
        descending = bool(item.descending)
        nulls = "first" if item.nulls_first else "last" if item.nulls_last else None
        expression = item.expression
    if isinstance(expression, F):
        return descending, nulls, str(getattr(expression, "name", ""))
    if isinstance(expression, Ref):
        return descending, nulls, str(getattr(expression, "refs", ""))
    if isinstance(expression, str) and expression != "?":
        if expression.startswith("-"):
            return True, nulls, expression[1:]
        return descending, nulls, expression.lstrip("+")
    return descending, nulls, None


def _is_field(model: Any, name: str) -> bool:
    if name == "pk":
        return True
    try:
        model._meta.get_field(name)
    except Exception:
        return False
    return "__" not in name


def _condition(
    node: Any, qs: models.QuerySet[Any], entries: list[_Entry], refused: list[str]
) -> Any:
    """A HAVING tree as the core's ``Condition`` over outputs (a hidden output for an
    aggregate only filtered on)."""
    if hasattr(node, "children") and not isinstance(node, Lookup):
        parts = tuple(_condition(c, qs, entries, refused) for c in node.children)
        made = Condition(node.connector.lower(), parts) if len(parts) > 1 else parts[0]
        return Condition("not", (made,)) if node.negated else made
    if not isinstance(node, Lookup):
        refused.append(f"the HAVING term {node!r}")
        return Condition("is null", (("value", None),))
    at = _annotation_output(node.lhs, qs, entries, refused)
    rhs = node.rhs
    if at is None or hasattr(rhs, "resolve_expression"):
        refused.append(f"the HAVING term {node.lookup_name} over {node.lhs!r}")
        return Condition("is null", (("value", None),))
    name = node.lookup_name
    if name == "isnull":
        test = Condition("is null", (("output", at),))
        return test if rhs else Condition("not", (test,))
    if name == "range":
        return Condition("between", (("output", at), ("value", rhs[0]), ("value", rhs[1])))
    if name == "exact" and rhs is None:
        return Condition("is null", (("output", at),))
    op = _LOOKUPS.get(str(name))
    if op is None:
        refused.append(f"the HAVING lookup {name}")
        return Condition("is null", (("value", None),))
    value = tuple(rhs) if op == "in" else rhs
    return Condition(op, (("output", at), ("value", value)))


def _annotation_output(
    lhs: Any, qs: models.QuerySet[Any], entries: list[_Entry], refused: list[str]
) -> int | None:
    if isinstance(lhs, Ref):
        lhs = getattr(lhs, "source", lhs)
    for i, entry in enumerate(entries):
        if entry.expression is lhs:
            return i
    for name, expression in all_annotations(qs.query).items():
        if expression is lhs:
            made, why = _entry(name, expression, hidden=True)
            refused += why
            entries.append(made)
            return len(entries) - 1
    return None


# -- running a plan ------------------------------------------------------------------------


def _partial(expression: Any, role: str) -> Any:
    """The aggregate each shard computes for ``role`` of an output."""
    if role == _kind(expression):
        return expression
    made = {"sum": Sum, "count": Count}[role]
    return made(aggregate_argument(expression), filter=aggregate_filter(expression))


def _argument(expression: Any) -> Any:
    """The argument of a DISTINCT aggregate, NULL where its filter rejects the row."""
    source = aggregate_argument(expression)
    condition = aggregate_filter(expression)
    if condition is None:
        return source
    return Case(When(condition, then=source), output_field=source.output_field)


class _Run:
    """Each shard's rows of a plan, in the plan's columns."""

    def __init__(self, described: _Described, plan: planner.Plan) -> None:
        self.described, self.plan = described, plan

    def parts(
        self, qs: models.QuerySet[Any], aliases: Sequence[str]
    ) -> tuple[list[list[tuple[Any, ...]]], list[str]]:
        plan, entries = self.plan, self.described.entries
        template: Any
        if plan.kind == "rows":
            template = limited(qs, plan.limit).values_list(*[e.name for e in entries])
            work: Callable[[Any], Any] = lambda shard: [tuple(r) for r in shard]  # noqa: E731
        else:
            template, work = self._grouped(qs)
        shards = [template._for_alias(alias) for alias in aliases]
        parts = gather(shards, work)
        return parts, [shard.db for shard in shards]

    def _grouped(self, qs: models.QuerySet[Any]) -> tuple[Any, Callable[[Any], Any]]:
        plan, entries = self.plan, self.described.entries
        annotations = all_annotations(self.described.qs.query)
        dropped = [n for n, e in annotations.items() if getattr(e, "contains_aggregate", False)]
        base = shard_base(self.described.qs, dropped)
        names: list[str] = []
        values: list[str] = []
        arguments: dict[str, Any] = {}
        partials: dict[str, Any] = {}
        for i, column in enumerate(plan.columns):
            entry = entries[column.output]
            if column.role == "value":
                values.append(entry.name)
                names.append(entry.name)
                continue
            name = f"uidf{i}"
            names.append(name)
            if column.role == "argument":
                arguments[name] = _argument(entry.expression)
            elif plan.kind == "aggregate":
                # asked of the query itself, so as written (a filter resolves there)
                original = self.described.originals[entry.name]
                partials[name] = _partial(original, column.role)
            else:
                partials[name] = _partial(entry.expression, column.role)
        if plan.kind == "aggregate":
            # Django's own aggregate() of the query as it is: of its distinct rows when it
            # is distinct() (a subquery), each row once
            return qs, lambda shard: [tuple(shard.aggregate(**partials)[n] for n in names)]
        shaped = base.values(*values, **arguments)
        shaped = shaped.annotate(**partials) if partials else shaped.distinct()
        return shaped.values_list(*names), lambda shard: [tuple(r) for r in shard]


def _combined(
    qs: models.QuerySet[Any], described: _Described, shards: Sequence[str]
) -> list[tuple[Any, ...]]:
    plan = planner.plan(described.statement)
    run = _Run(described, plan)
    parts, aliases = run.parts(qs, shards)
    vendors = [connections[alias].vendor for alias in aliases]
    ranker = _text_ranker(qs.model, aliases[0]) if aliases else None
    rows = combine(plan, parts, vendors, text_ranks=ranker)
    entries = [e for e in described.entries if not e.hidden]
    averaged = [i for i, e in enumerate(entries) if e.aggregate == "avg"]
    if averaged and aliases:
        rows = [
            tuple(
                converted(entries[i].expression, v, aliases[0]) if i in averaged else v
                for i, v in enumerate(row)
            )
            for row in rows
        ]
    return rows


def results(qs: models.QuerySet[Any], shards: Sequence[str]) -> list[Any]:
    """The rows of a planned fan-out (``planned``) over the databases ``shards``, in the
    form the queryset yields."""
    described = _describe(qs)
    rows = _combined(qs, described, shards)
    names = [e.name for e in described.entries if not e.hidden]
    return _shaped(qs, names, rows)


def _shaped(
    qs: models.QuerySet[Any], names: list[str], rows: Sequence[tuple[Any, ...]]
) -> list[Any]:
    iterable = iterable_class(qs)
    if iterable is ValuesIterable:
        return [dict(zip(names, row, strict=True)) for row in rows]
    wanted = selected_names(qs)
    order = [*wanted, *(n for n in names if n not in wanted)] if wanted else names
    at = [names.index(n) for n in order]
    tuples = [tuple(row[i] for i in at) for row in rows]
    if iterable is FlatValuesListIterable:
        return [row[0] for row in tuples]
    if iterable is NamedValuesListIterable:
        factory = namedtuple("Row", order)  # type: ignore[misc]
        return [factory(*row) for row in tuples]
    return tuples


def aggregate(
    qs: models.QuerySet[Any], expressions: dict[str, Any], shards: Sequence[str]
) -> dict[str, Any]:
    """``qs.aggregate(**expressions)`` over the databases ``shards``, combined exactly or
    refused."""
    low, high = limits(qs)
    found = []
    if low or high is not None:
        found.append("aggregate() of a slice")
    if grouping(qs) is not None or planned(qs):
        found.append("aggregate() over groups or DISTINCT values")
    if any(getattr(e, "contains_aggregate", False) for e in all_annotations(qs.query).values()):
        found.append("aggregate() over annotations of aggregates")
    planner.refuse(found)
    described = _describe(qs, expressions)
    if (
        compat.is_distinct(qs)
        and any(
            e.aggregate and not getattr(e.expression, "distinct", False) for e in described.entries
        )
        and any(getattr(e.expression, "distinct", False) for e in described.entries)
    ):
        planner.refuse(["aggregate(DISTINCT ...) with other aggregates of a distinct() query"])
    (row,) = _combined(qs, described, shards)
    return dict(zip(expressions, row, strict=True))
