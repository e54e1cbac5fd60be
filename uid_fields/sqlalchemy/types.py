"""Column types: plain ``int`` / stdlib ``uuid.UUID`` values, checked before SQL runs.

The types carry only what the database and the queries need (the layout, for bounds
checks, decoding and time comparators); generators live on the column (see
``fields``), so a foreign key that copies the type never generates ids. ``repr()``
round-trips without the layout, which is what an Alembic migration needs: the DDL
is a ``BIGINT`` or a ``UUID``, and epochs never end up in migrations.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import BigInteger, String, Uuid
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from ..ids import locality, uniqid
from ..ids.layouts import (
    SIGNED_MAX,
    UNSIGNED_MAX,
    DecimalLayout,
    DecimalParts,
    IntLayout,
    Parts,
    SnowflakeParts,
    coerce_id,
)
from ..ids.locality import LocalityParts
from ..ids.public import PublicIds
from .comparators import IdTime, PublicIdMethods, public_checked

__all__ = ["LocalityUUIDType", "SnowflakeType", "UniqIdType"]


class _CacheOkSubclasses:
    """SQLAlchemy reads ``cache_ok`` from each class's own ``__dict__``; re-declare it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "cache_ok" not in cls.__dict__:
            cls.cache_ok = True  # type: ignore[attr-defined]


class SnowflakeType(_CacheOkSubclasses, TypeDecorator[int]):
    """A 64-bit id in a ``BIGINT`` (``BIGINT UNSIGNED`` on MySQL/MariaDB if unsigned).

    Bound values are checked against the layout's range (digit strings are accepted
    and become ints), so a bad id is a ``StatementError`` before the database sees it.
    """

    impl = BigInteger
    cache_ok = True

    class comparator_factory(PublicIdMethods, TypeDecorator.Comparator[int]):
        kind = "int"

        @property
        def time(self) -> IdTime:
            """``Order.id.time >= dt``: time predicates as bounds on the id."""
            id_type = self.type
            layout = id_type.layout if isinstance(id_type, SnowflakeType) else None
            if layout is None:
                raise TypeError(
                    f"{self.expr} has no layout to compare times with: declare it with a "
                    "generator (SnowflakeField/ShardedBigIntField) or SnowflakeType(layout)"
                )
            return IdTime(self.expr, layout)

    def __init__(
        self,
        layout: IntLayout | None = None,
        *,
        unsigned: bool | None = None,
        public_ids: PublicIds | None = None,
    ) -> None:
        super().__init__()
        # Tokens of these ids (``Order.id.public``); never in repr(), so never in migrations.
        self.public_ids = public_checked(public_ids, "int")
        if layout is not None and not isinstance(layout, IntLayout):
            raise TypeError(f"layout must be a SnowflakeLayout or DecimalLayout, got {layout!r}")
        self.layout = layout
        if unsigned is None:
            unsigned = layout.unsigned if layout is not None else False
        self.unsigned = bool(unsigned)
        if layout is not None:
            self.max_value = layout.max_value
        else:
            self.max_value = UNSIGNED_MAX if self.unsigned else SIGNED_MAX

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if self.unsigned and dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.BIGINT(unsigned=True))
        return dialect.type_descriptor(BigInteger())

    def coerce(self, value: object) -> int:
        """``value`` as an id of this column: an int, or text under the core's rule
        (``coerce_id``: ASCII digits only); ValueError/TypeError otherwise."""
        if type(value) is int and 0 <= value <= self.max_value:
            return value
        return coerce_id(value, max_value=self.max_value)

    def process_bind_param(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        return self.coerce(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> int | None:
        return None if value is None else int(value)

    @property
    def python_type(self) -> type[int]:
        return int

    @property
    def parts_type(self) -> type[Parts] | None:
        """The class ``decompose`` returns (None without a layout)."""
        if self.layout is None:
            return None
        return DecimalParts if isinstance(self.layout, DecimalLayout) else SnowflakeParts

    def decompose(self, value: object) -> Parts:
        """The decoded parts of an id of this column."""
        if self.layout is None:
            raise TypeError("this column has no layout to decode ids with")
        return self.layout.decompose(value)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(unsigned=True)" if self.unsigned else f"{name}()"


class LocalityUUIDType(_CacheOkSubclasses, TypeDecorator[uuid.UUID]):
    """A locality UUID in a native ``UUID`` (``CHAR(32)`` where there is none).

    Values are stdlib ``uuid.UUID`` both ways (SQLAlchemy matches insert sentinels and
    identity keys by exact equality); strings are parsed, malformed ones refused.
    """

    impl = Uuid
    cache_ok = True

    class comparator_factory(PublicIdMethods, TypeDecorator.Comparator[uuid.UUID]):
        kind = "uuid"

    def __init__(self, *, public_ids: PublicIds | None = None) -> None:
        super().__init__()
        self.public_ids = public_checked(public_ids, "uuid")

    def process_bind_param(self, value: Any, dialect: Dialect) -> uuid.UUID | None:
        return None if value is None else self.coerce(value)

    def coerce(self, value: object) -> uuid.UUID:
        """``value`` as a stdlib ``uuid.UUID`` under the core's rule (``coerce_uuid``);
        ValueError/TypeError if it is none."""
        return locality.coerce_uuid(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> uuid.UUID | None:
        if value is None or type(value) is uuid.UUID:
            return value
        return uuid.UUID(str(value))

    @property
    def python_type(self) -> type[uuid.UUID]:
        return uuid.UUID

    @property
    def parts_type(self) -> type[LocalityParts]:
        return LocalityParts

    def decompose(self, value: object) -> LocalityParts:
        return locality.decompose(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class UniqIdType(_CacheOkSubclasses, TypeDecorator[str]):
    """A shard-prefixed PHP uniqid in ``CHAR(18)``-sized text, the SQLAlchemy twin of
    Django's ``UniqIdField``.

    ``total_shards`` (the divisor of the shard digit) is kept for decoding; a value that
    is not a well-formed uniqid of that many shards is refused before SQL runs, so a
    malformed id from a URL never reaches a query.
    """

    impl = String(uniqid.LENGTH)
    cache_ok = True

    def __init__(self, total_shards: int | None = None) -> None:
        super().__init__()
        self.total_shards = total_shards

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else self.coerce(value)

    def coerce(self, value: object) -> str:
        """``value`` if it is a well-formed uniqid of this column; ValueError/TypeError."""
        if not isinstance(value, str):
            raise TypeError(f"expected a uniqid string, got {type(value).__name__}")
        if self.total_shards is not None:
            uniqid.decompose(value, self.total_shards)  # ValueError naming the bad part
        return value

    @property
    def python_type(self) -> type[str]:
        return str

    @property
    def parts_type(self) -> type[uniqid.UniqIdParts] | None:
        return uniqid.UniqIdParts if self.total_shards is not None else None

    def decompose(self, value: object) -> uniqid.UniqIdParts:
        if self.total_shards is None:
            raise ValueError("this uniqid column does not know its total_shards")
        return uniqid.decompose(value, self.total_shards)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
