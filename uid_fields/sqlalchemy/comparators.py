"""``Order.id.time >= dt``: time predicates rewritten as integer bounds on the id; and
``Order.id.public == token``: a public token compared as the id it stands for.

The id's high bits are its time, so "created since t" is ``id >= min_id(t)``: a primary
key range scan, no function over every row and no extra column. Comparisons have the
layout's time resolution (1 ms for most layouts): an instant stands for its whole time
unit. Instants outside the layout's lifetime never become out-of-range bigint literals;
they give conditions that are always true (``id IS NOT NULL``) or always false.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import false, literal
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from ..ids.layouts import IntLayout
from ..ids.public import Kind, PublicIds

__all__ = ["IdTime", "PublicId", "PublicIdMethods", "public_checked", "public_ids_of"]

_OPERATORS = {">=": operators.ge, ">": operators.gt, "<=": operators.le, "<": operators.lt}

Instant = datetime | int  # an aware datetime, or Unix milliseconds


class IdTime:
    """The creation time of the ids in a column, as comparisons that compile to bounds."""

    __slots__ = ("column", "layout")

    def __init__(self, column: ColumnElement[Any], layout: IntLayout) -> None:
        self.column = column
        self.layout = layout

    def _bound(self, value: int) -> ColumnElement[Any]:
        # literal_execute: the statement stays cacheable, the database sees the integer.
        id_type: TypeEngine[Any] = self.column.type
        return literal(value, id_type, literal_execute=True)

    def _always(self) -> ColumnElement[bool]:
        return self.column.is_not(None)

    def _compare(self, op: str, at: Instant) -> ColumnElement[bool]:
        condition = self.layout.time_condition(op, at)
        if condition is True:
            return self._always()
        if condition is False:
            return false()
        op, bound = condition
        return self.column.operate(_OPERATORS[op], self._bound(bound))

    def __ge__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare(">=", at)

    def __gt__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare(">", at)

    def __le__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare("<=", at)

    def __lt__(self, at: Instant) -> ColumnElement[bool]:
        return self._compare("<", at)

    def between(self, start: Instant, end: Instant) -> ColumnElement[bool]:
        """Ids made from ``start`` to ``end``, both time units included."""
        return (self >= start) & (self <= end)

    def __eq__(self, at: object) -> ColumnElement[bool]:  # type: ignore[override]
        """Ids made in the time unit of ``at``."""
        if not isinstance(at, (datetime, int)):
            return NotImplemented
        return self.between(at, at)

    def __ne__(self, at: object) -> ColumnElement[bool]:  # type: ignore[override]
        if not isinstance(at, (datetime, int)):
            return NotImplemented
        return (self < at) | (self > at)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<IdTime of {self.column}>"


# -- public ids ---------------------------------------------------------------------------
def public_ids_of(column: ColumnElement[Any], *, kind: Kind) -> PublicIds:
    """The public-id codec of a column: its type's (``public_ids=`` on the field), or, for
    a foreign key, the codec of the column it points at (the same ids, the same tokens)."""
    codec = getattr(column.type, "public_ids", None)
    if codec is None:
        for candidate in getattr(column, "proxy_set", (column,)):
            for foreign_key in getattr(candidate, "foreign_keys", ()):
                try:
                    target = foreign_key.column
                except Exception:  # the referenced table is not in this metadata (yet)
                    continue
                codec = getattr(target.type, "public_ids", None)
                if codec is not None:
                    break
            if codec is not None:
                break
    if not isinstance(codec, PublicIds):
        raise TypeError(
            f"{column} has no public ids: give its field public_ids=PublicIds(prefix, keys)"
        )
    if codec.kind not in (None, kind):
        raise TypeError(f"{column} holds {kind} ids, but its public ids are {codec.kind}s")
    return codec


def public_checked(public_ids: object, kind: Kind) -> PublicIds | None:
    """``public_ids=`` of a field or type: None, or a codec that reads ``kind`` ids."""
    if public_ids is None:
        return None
    if not isinstance(public_ids, PublicIds):
        raise TypeError(f"public_ids must be a uid_fields.PublicIds, got {public_ids!r}")
    if public_ids.kind not in (None, kind):
        raise TypeError(f"this column holds {kind} ids, but public_ids reads {public_ids.kind}s")
    return public_ids


class PublicId:
    """``Order.id.public``: comparisons with public tokens, compiled to the stored ids.

    ``Order.id.public == token`` is ``Order.id == <the id>``: the token is decoded when
    the statement is built (``PublicIdError``, a ``ValueError``, for a bad one), so the
    sharded session routes the statement to the id's shard as it routes ``id == x``.
    """

    __slots__ = ("column", "decode")

    def __init__(self, column: ColumnElement[Any], decode: Callable[[str], Any]) -> None:
        self.column = column
        self.decode = decode

    def __eq__(self, token: object) -> ColumnElement[bool]:  # type: ignore[override]
        return self.column.operate(operators.eq, self.decode(token))  # type: ignore[arg-type]

    def __ne__(self, token: object) -> ColumnElement[bool]:  # type: ignore[override]
        return self.column.operate(operators.ne, self.decode(token))  # type: ignore[arg-type]

    def in_(self, tokens: Iterable[str]) -> ColumnElement[bool]:
        return self.column.in_([self.decode(token) for token in tokens])

    def not_in(self, tokens: Iterable[str]) -> ColumnElement[bool]:
        return self.column.not_in([self.decode(token) for token in tokens])

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<PublicId of {self.column}>"


class PublicIdMethods:
    """``.public``, ``.public_decode(token)`` and ``.public_encode(value)`` on a column
    (mixed into the uid types' comparators): the type's codec, read ``kind`` ids."""

    kind: Kind = "int"
    expr: ColumnElement[Any]

    def _public_ids(self) -> PublicIds:
        return public_ids_of(self.expr, kind=self.kind)

    def _decoder(self) -> Callable[[str], Any]:
        codec = self._public_ids()
        return codec.decode_int if self.kind == "int" else codec.decode_uuid

    @property
    def public(self) -> PublicId:
        """``Order.id.public == token``: compares with the id a token stands for."""
        return PublicId(self.expr, self._decoder())

    def public_decode(self, token: str) -> Any:
        """The id a token of this column stands for (``session.get(Order, ...)``)."""
        return self._decoder()(token)

    def public_encode(self, value: Any) -> str:
        """The public token of an id of this column."""
        return self._public_ids().encode(value)
