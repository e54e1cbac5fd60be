"""Combining the shards' answers to a planned fan-out (``ops.planner``) into the one answer.

Rows merge in the ORDER BY by the core's merge rules (``ops.merge``); partial aggregates
combine (counts and sums add up, min and max of the non-NULL answers); groups that span
shards merge on their keys; HAVING, ORDER BY and the slice apply after the merge.

Two details make a combined answer equal to one database's, not merely close to it:

- Equality of text. PostgreSQL's and SQLite's default collations are deterministic (equal
  means the same code points), MySQL's and MariaDB's are not (``"a"`` equals ``"A"`` and
  ``"a "``): there a text group key or DISTINCT value is compared by its rank in the
  column's collation, asked of the database as the ORDER BY merge asks it.
- AVG. One database divides its SUM by its COUNT with its own arithmetic: PostgreSQL's
  NUMERIC keeps at least 16 significant digits (``select_div_scale``), MySQL and MariaDB
  add ``div_precision_increment`` (4) digits to the sum's scale, SQLite divides doubles.
  ``average`` repeats each, so ``avg(score)`` over shards is the same value, digit for
  digit. (A sum of floating-point values depends on the order it is added in, on one
  database too: a float AVG may differ from another run's in its last bits.)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from ..errors import UnmergeableQueryError
from .merge import SortKey, TextRanker, backend_of, merge_rows
from .planner import Condition, Operand, Plan, Statement

__all__ = ["average", "combine", "distinct_rows", "sort_keys"]

#: Backends whose default text equality is not code-point equality.
_FOLDING = ("mysql", "mariadb")

_WIDE = Context(prec=200)


def average(total: Any, count: int, vendor: str) -> Any:
    """What ``vendor``'s AVG returns for a column whose SUM is ``total`` over ``count``
    non-NULL values (None when there were none)."""
    if not count or total is None:
        return None
    if isinstance(total, float) or vendor == "sqlite" or isinstance(total, bool):
        return float(total) / count
    exact = Decimal(total)
    quotient = _WIDE.divide(exact, Decimal(count))
    scale = max(0, -int(exact.as_tuple().exponent))
    if vendor in _FOLDING:
        scale += 4  # div_precision_increment's default
    elif vendor == "postgresql":
        scale = _postgres_scale(exact, count, scale)
    else:
        return quotient
    return quotient.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_WIDE)


def _postgres_scale(total: Decimal, count: int, scale: int) -> int:
    """PostgreSQL's result scale of NUMERIC ``total / count`` (``select_div_scale``): at
    least 16 significant digits, counted in its base-10000 digits, and at least the scale
    of either operand, at most 1000."""
    weight1, first1 = _base_10000(total)
    weight2, first2 = _base_10000(Decimal(count))
    qweight = weight1 - weight2 - (1 if first1 <= first2 else 0)
    return min(max(16 - qweight * 4, scale, 0), 1000)


def _base_10000(value: Decimal) -> tuple[int, int]:
    """The weight and first digit of ``value`` written in base 10000 (0, 0 for zero)."""
    value = abs(value)
    if value == 0:
        return 0, 0
    if value >= 1:
        whole = int(value)
        weight = (len(str(whole)) - 1) // 4
        return weight, whole // 10000**weight
    weight, scaled = -1, value * 10000
    while int(scaled) == 0:
        weight, scaled = weight - 1, scaled * 10000
    return weight, int(scaled)


def sort_keys(statement: Statement) -> list[SortKey]:
    """The statement's ORDER BY as merge keys over rows of its outputs."""
    return [
        SortKey(_at(o.output), o.descending, o.nulls, statement.outputs[o.output].name)
        for o in statement.order
    ]


def _at(position: int) -> Callable[[Sequence[Any]], Any]:
    return lambda row: row[position]


class _Equality:
    """Values as the database compares them: text by its collation's rank where the
    backend folds (MySQL, MariaDB), anything else as Python does."""

    def __init__(
        self,
        statement: Statement,
        vendor: str,
        text_ranks: TextRanker | None,
        values: Mapping[int, list[Any]],
    ) -> None:
        self.ranks: dict[int, Mapping[str, int]] = {}
        if vendor not in _FOLDING:
            return
        for position, seen in values.items():
            texts = sorted({v for v in seen if isinstance(v, str)})
            if not texts:
                continue
            if text_ranks is None:
                name = statement.outputs[position].name
                raise UnmergeableQueryError(
                    f"comparing the text {name} across shards needs the column's "
                    "collation, which this merge cannot ask"
                )
            key = SortKey(_at(position), name=statement.outputs[position].name)
            self.ranks[position] = text_ranks(key, texts)

    def key(self, position: int, value: Any) -> Hashable:
        ranks = self.ranks.get(position)
        if ranks is not None and isinstance(value, str):
            return ("text", ranks[value])
        known: Hashable = value
        return known


def distinct_rows(
    rows: Sequence[Sequence[Any]],
    statement: Statement,
    vendor: str,
    text_ranks: TextRanker | None = None,
) -> list[Any]:
    """``rows`` with each row the database would call equal to an earlier one left out.
    A row that is one object (an ORM entity, not a tuple of columns) is its own value:
    objects of different shards are different rows (their primary keys differ)."""
    values = [row if _is_row(row) else (row,) for row in rows]
    width = len(values[0]) if values else 0
    texts = {
        i: [value[i] for value in values]
        for i in range(width)
        if i < len(statement.outputs) and statement.outputs[i].text
    }
    equality = _Equality(statement, vendor, text_ranks, texts)
    seen: set[tuple[Hashable, ...]] = set()
    kept = []
    for row, value in zip(rows, values, strict=True):
        key = tuple(equality.key(i, v) for i, v in enumerate(value))
        if key not in seen:
            seen.add(key)
            kept.append(row)
    return kept


def _is_row(row: Any) -> bool:
    """Whether ``row`` is a row of columns (a DB-API tuple, an ORM ``Row``)."""
    return hasattr(row, "__len__") and hasattr(row, "__getitem__") and not isinstance(row, str)


def combine(
    plan: Plan,
    parts: Sequence[Sequence[Sequence[Any]]],
    vendors: str | Sequence[str],
    *,
    text_ranks: TextRanker | None = None,
) -> list[tuple[Any, ...]]:
    """The one answer, as rows of the statement's visible outputs, from each shard's rows
    of ``plan.columns``."""
    vendor = backend_of(vendors) if parts else "sqlite"
    statement = plan.statement
    if plan.bound is not None and sum(len(p) for p in parts) > plan.bound:
        raise UnmergeableQueryError(
            f"the distinct values of this fan-out are more than {plan.bound} rows from all "
            "shards together, the bound of a merge of distinct values held in memory"
        )
    if plan.kind == "rows":
        rows: list[Any] = merge_rows(parts, sort_keys(statement), vendor, text_ranks=text_ranks)
        if plan.distinct:
            rows = distinct_rows(rows, statement, vendor, text_ranks)
    else:
        rows = _groups(plan, parts, vendor, text_ranks)
        if statement.having is not None:
            rows = [row for row in rows if _truth(statement.having, row) is True]
        rows = merge_rows([rows], sort_keys(statement), vendor, text_ranks=text_ranks)
    offset, limit = plan.window
    rows = rows[offset : None if limit is None else offset + limit]
    visible = plan.visible
    if len(visible) == len(statement.outputs):
        return [tuple(row) for row in rows]
    return [tuple(row[i] for i in visible) for row in rows]


def _groups(
    plan: Plan, parts: Sequence[Sequence[Sequence[Any]]], vendor: str, ranks: TextRanker | None
) -> list[list[Any]]:
    statement = plan.statement
    columns = plan.columns
    rows = [row for part in parts for row in part]
    keyed = {
        c.output: [row[i] for row in rows]
        for i, c in enumerate(columns)
        if c.role in ("value", "argument") and statement.outputs[c.output].text
    }
    equality = _Equality(statement, vendor, ranks, keyed)
    keys = [i for i, c in enumerate(columns) if c.role == "value"]
    groups: dict[tuple[Hashable, ...], list[Any]] = {}
    for row in rows:
        group = tuple(equality.key(columns[i].output, row[i]) for i in keys)
        state = groups.get(group)
        if state is None:
            state = groups[group] = [_start(c.role) for c in columns]
        for i, column in enumerate(columns):
            state[i] = _add(column.role, state[i], row[i], equality, column.output)
    if not groups and statement.group_by is None:
        groups[()] = [_start(c.role) for c in columns]  # one row over no rows, as SQL
    return [_finish(plan, state, vendor) for state in groups.values()]


def _start(role: str) -> Any:
    return {} if role == "argument" else _EMPTY


_EMPTY: Any = object()  # no answer yet (not NULL: a value column's NULL is an answer)


def _add(role: str, state: Any, value: Any, equality: _Equality, output: int) -> Any:
    if role == "argument":
        if value is not None:
            state.setdefault(equality.key(output, value), value)
        return state
    if role == "value":
        return value if state is _EMPTY else state
    if role == "count":
        return (0 if state is _EMPTY else state) + (value or 0)
    if value is None:
        return None if state is _EMPTY else state
    if state is _EMPTY or state is None:
        return value
    if role == "sum":
        return state + value
    if role == "min":
        return min(state, value)
    if role == "max":
        return max(state, value)
    if role == "bool_and":
        return state and value
    return state or value  # bool_or


def _finish(plan: Plan, state: list[Any], vendor: str) -> list[Any]:
    """The statement's outputs of one group from its combined shard columns."""
    out: list[Any] = []
    for index, output in enumerate(plan.statement.outputs):
        places = plan.columns_of(index)
        values = [None if state[p] is _EMPTY else state[p] for p in places]
        roles = [plan.columns[p].role for p in places]
        kind = output.aggregate
        if roles == ["argument"]:
            arguments: dict[Hashable, Any] = state[places[0]]  # never _EMPTY (_start)
            distinct = list(arguments.values())
            if kind == "count":
                out.append(len(distinct))
                continue
            total = sum(distinct) if distinct else None
            out.append(total if kind == "sum" else average(total, len(distinct), vendor))
        elif roles == ["sum", "count"]:
            out.append(average(values[0], values[1] or 0, vendor))
        elif roles == ["count"]:
            out.append(values[0] or 0)
        else:
            out.append(values[0])
    return out


def _value(operand: Operand | Condition, row: Sequence[Any]) -> Any:
    if isinstance(operand, Condition):
        return _truth(operand, row)
    kind, value = operand
    return row[value] if kind == "output" else value


def _truth(condition: Condition, row: Sequence[Any]) -> bool | None:
    """SQL's three-valued truth of ``condition`` over one combined row."""
    op = condition.op
    values = [_value(o, row) for o in condition.operands]
    if op == "and":
        return False if False in values else None if None in values else True
    if op == "or":
        return True if True in values else None if None in values else False
    if op == "not":
        return None if values[0] is None else not values[0]
    if op == "is null":
        return values[0] is None
    if any(v is None for v in values):
        return None
    left = values[0]
    if op == "in":
        return left in values[1]
    if op == "between":
        return bool(values[1] <= left <= values[2])
    compare: dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    if op not in compare:
        raise UnmergeableQueryError(f"the HAVING operator {op!r}")
    return bool(compare[op](left, values[1]))
