"""The fan-out planner: a SELECT over every shard is run only in a form proven to combine.

Each adapter describes its ORM's statement in the terms below (``Statement``: what it
returns, how it groups, orders and slices, and every construct it found that is not known
to decompose); ``plan`` answers with what each shard runs and how the answers combine, or
refuses with ``UnmergeableQueryError`` naming the construct, before any query runs.

It is an allowlist, as the planners of Vitess and Citus are: the adapters report each
construct they cannot prove per-shard (a subquery whose rows span shards, a window, a join
of rows that are not co-located, a set operation, ``FOR UPDATE``, ``DISTINCT ON``, ``WITH
TIES``, an aggregate that does not combine), and a statement with one is refused. What
decomposes:

- rows: each shard runs the statement with ``LIMIT offset + limit`` and no OFFSET; the
  rows merge in the ORDER BY (``ops.merge``) and are sliced again. With DISTINCT each
  shard's rows are distinct already, and a row two shards return is kept once.
- aggregates without GROUP BY: each shard returns one row of partial results; counts and
  sums add up, min and max of the non-NULL ones, AVG from a SUM and a COUNT per shard.
- groups: each shard groups by the same keys; groups that span shards merge (partials
  combined as above), HAVING is applied after the merge, then ORDER BY and the slice.
- ``count(DISTINCT x)`` (and SUM/AVG of DISTINCT): ``x`` joins the shards' grouping, so
  each returns its distinct values per group, and the merge counts the values across
  shards. That holds every distinct value in memory: at most ``DISTINCT_BOUND`` rows from
  all shards together, above which the statement is refused with the bound named.

Knows no ORM; the combining itself is ``ops.combine``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import UnmergeableQueryError
from .merge import NullsOrder

__all__ = [
    "COMBINABLE",
    "DISTINCT_BOUND",
    "Condition",
    "Operand",
    "Ordering",
    "Output",
    "Plan",
    "ShardColumn",
    "Statement",
    "plan",
]

#: Aggregates whose per-shard answers combine into the one answer (AVG through a SUM and
#: a COUNT per shard; the boolean ones as AND / OR of the shards' answers).
COMBINABLE = frozenset({"count", "sum", "min", "max", "avg", "bool_and", "bool_or", "every"})

#: Aggregates over DISTINCT values that combine by merging the shards' distinct values.
DISTINCT_COMBINABLE = frozenset({"count", "sum", "avg", "min", "max"})

#: Rows fetched from all shards together for a merge of distinct values (``count(DISTINCT
#: x)`` and the like), above which the statement is refused rather than held in memory.
DISTINCT_BOUND = 100_000

#: What one column a shard selects is, for the output it serves: the output's own
#: expression (``value``, or the aggregate itself: ``count``, ``sum``, ``min``, ``max``,
#: ``bool_and``, ``bool_or``), the SUM or COUNT an AVG is made of, or the argument of a
#: DISTINCT aggregate (grouped by on every shard).
Role = Literal["value", "count", "sum", "min", "max", "bool_and", "bool_or", "argument"]


@dataclass(frozen=True)
class Output:
    """One column of the statement's result, as the adapter found it."""

    name: str
    aggregate: str | None = None  # the function, lower case; None for a value
    distinct: bool = False  # aggregate(DISTINCT x)
    hidden: bool = False  # selected for the merge only (ORDER BY, HAVING): dropped after
    text: bool = False  # a text value (its collation may equate strings Python tells apart)


@dataclass(frozen=True)
class Ordering:
    """One ORDER BY term, over an output."""

    output: int
    descending: bool = False
    nulls: NullsOrder | None = None  # an explicit NULLS FIRST/LAST


#: An operand of a HAVING condition: ``("output", i)``, ``("value", v)`` or a condition.
Operand = tuple[str, Any]


@dataclass(frozen=True)
class Condition:
    """A HAVING term, evaluated after the merge with SQL's three-valued logic.

    ``op`` is ``and``, ``or``, ``not``, ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
    ``is null``, ``in`` (the second operand a ``("value", tuple)``) or ``between``."""

    op: str
    operands: tuple[Operand | Condition, ...]


@dataclass(frozen=True)
class Statement:
    """A SELECT as the planner sees it: ORM-neutral, with every construct the adapter could
    not prove per-shard listed in ``refused`` (each named as a user would recognise it)."""

    outputs: tuple[Output, ...]
    group_by: tuple[int, ...] | None = None  # outputs grouped by; None: no GROUP BY
    distinct: bool = False
    order: tuple[Ordering, ...] = ()
    limit: int | None = None
    offset: int = 0
    having: Condition | None = None
    refused: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShardColumn:
    """One column each shard selects: ``role`` of the statement's output ``output``."""

    output: int
    role: Role


@dataclass(frozen=True)
class Plan:
    """What each shard runs and how the answers combine (``ops.combine.combine``).

    ``kind`` is ``rows`` (the statement itself on each shard, merged and sliced),
    ``aggregate`` (one row of partials per shard) or ``groups`` (each shard groups by
    ``group_by``, positions in ``columns``). Each shard runs no OFFSET, ``limit`` as its
    LIMIT (None: none), DISTINCT when ``distinct``; ``window`` is the slice taken after
    the merge. ``bound``: the most rows all shards together may return (a distinct-value
    merge), else the statement is refused.
    """

    statement: Statement
    kind: Literal["rows", "aggregate", "groups"]
    columns: tuple[ShardColumn, ...]
    group_by: tuple[int, ...] = ()
    distinct: bool = False
    limit: int | None = None
    window: tuple[int, int | None] = (0, None)
    bound: int | None = None
    visible: tuple[int, ...] = field(default=())

    def columns_of(self, output: int) -> tuple[int, ...]:
        """The positions of the shard columns that serve ``output``."""
        return tuple(i for i, c in enumerate(self.columns) if c.output == output)


def plan(statement: Statement) -> Plan:
    """How ``statement`` runs over every shard; ``UnmergeableQueryError`` naming the first
    construct that does not decompose."""
    if statement.refused:
        raise UnmergeableQueryError(
            f"{statement.refused[0]} across shards cannot be answered exactly from each "
            "shard's rows; run it per shard (with the shard's alias) or read the rows and "
            "combine them yourself"
        )
    if (statement.limit is not None and statement.limit < 0) or statement.offset < 0:
        raise UnmergeableQueryError("a negative LIMIT or OFFSET")
    outputs = statement.outputs
    visible = tuple(i for i, o in enumerate(outputs) if not o.hidden)
    window = (statement.offset, statement.limit)
    aggregates = [o for o in outputs if o.aggregate is not None]
    for output in aggregates:
        _check_aggregate(output)
    grouped = statement.group_by is not None
    if not aggregates and not grouped:
        if statement.having is not None:
            raise UnmergeableQueryError("HAVING without GROUP BY or an aggregate")
        limit = None if statement.limit is None else statement.offset + statement.limit
        values = tuple(ShardColumn(i, "value") for i in range(len(outputs)))
        return Plan(
            statement,
            "rows",
            values,
            distinct=statement.distinct,
            limit=limit,
            window=window,
            visible=visible,
        )
    keys = set(statement.group_by or ())
    for i, output in enumerate(outputs):
        if output.aggregate is None and i not in keys:
            raise UnmergeableQueryError(
                f"the selected {output.name}, neither grouped by nor aggregated"
            )
    columns: list[ShardColumn] = []
    group_by: list[int] = []
    for i, output in enumerate(outputs):
        if output.aggregate is None:
            group_by.append(len(columns))
            columns.append(ShardColumn(i, "value"))
        elif output.distinct and output.aggregate in ("count", "sum", "avg"):
            group_by.append(len(columns))
            columns.append(ShardColumn(i, "argument"))
        elif output.aggregate == "avg":
            columns += [ShardColumn(i, "sum"), ShardColumn(i, "count")]
        else:
            role = "bool_and" if output.aggregate == "every" else output.aggregate
            columns.append(ShardColumn(i, role))  # type: ignore[arg-type]
    subgrouped = any(c.role == "argument" for c in columns)
    if not grouped and not subgrouped:
        return Plan(statement, "aggregate", tuple(columns), window=window, visible=visible)
    return Plan(
        statement,
        "groups",
        tuple(columns),
        group_by=tuple(group_by),
        window=window,
        bound=DISTINCT_BOUND if subgrouped else None,
        visible=visible,
    )


def _check_aggregate(output: Output) -> None:
    kind = str(output.aggregate)
    if output.distinct and kind not in DISTINCT_COMBINABLE | {"bool_and", "bool_or", "every"}:
        raise UnmergeableQueryError(f"{kind}(DISTINCT ...) ({output.name})")
    if kind not in COMBINABLE:
        raise UnmergeableQueryError(
            f"the aggregate {kind}() ({output.name}), which does not combine from the "
            "shards' answers (count, sum, min, max, avg, bool_and and bool_or do)"
        )


def refuse(found: Sequence[str]) -> None:
    """``UnmergeableQueryError`` for the first construct of ``found``, if any: for
    adapters that check a statement before describing it whole."""
    if found:
        plan(Statement((), refused=tuple(found)))
