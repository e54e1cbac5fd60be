"""Field constructors: ``mapped_column`` objects whose ids exist from construction on.

Each field records its generator and routing in ``Column.info`` (not on the type, so
foreign keys that copy the type stay plain). The ORM side assigns ids when objects are
built (see ``listeners``); the column's ``insert_default`` covers Core ``insert()``.
"""

from __future__ import annotations

import random
from typing import Any, Literal, Protocol

from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import MappedColumn, mapped_column
from sqlalchemy.sql.schema import Column

from ..generators import ShardedIdGenerator
from ..layouts import IntLayout, SnowflakeLayout
from ..locality import LocalityUUIDGenerator
from ..shards import ByField, Route, route_for
from .ddl import DatabaseIds
from .errors import ShardKeyError
from .types import LocalityUUIDType, SnowflakeType

__all__ = [
    "INFO_KEY",
    "FieldConfig",
    "LocalityUUIDField",
    "ShardedBigIntField",
    "SnowflakeField",
    "field_config",
]

INFO_KEY = "uid_fields"
Kind = Literal["snowflake", "sharded", "locality"]


class IntIdGenerator(Protocol):
    layout: IntLayout

    def next_id(self) -> int: ...

    def next_ids(self, count: int) -> list[int]: ...


class FieldConfig:
    """What a uid column knows: how to make its ids and how they route."""

    def __init__(
        self,
        kind: Kind,
        *,
        generator: Any,
        route: Route,
        shard_key: str | None = None,
        database_ids: DatabaseIds | None = None,
    ) -> None:
        self.kind = kind
        self.generator = generator
        self.route = route
        self.shard_key = shard_key  # attribute name on the mapped class
        self.shard_key_column: str | None = shard_key  # column key, fixed once mapped
        self.database_ids = database_ids

    @property
    def client_side(self) -> bool:
        return self.generator is not None

    def logical_shard_of_key(self, value: object) -> int:
        """The logical shard a shard key value names; ShardKeyError if it is no key."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ShardKeyError(
                f"shard key {self.shard_key}={value!r} must be an int, not {type(value).__name__}"
            )
        if isinstance(self.generator, ShardedIdGenerator):
            return self.generator.shard_for_key(value)
        return value % self.route.logical_shards

    def new_id(self, shard_key_value: object = None) -> Any:
        """A fresh id; sharded fields need their shard key's value."""
        generator = self.generator
        if generator is None:
            raise TypeError("ids of this column are made by the database")
        if not isinstance(generator, ShardedIdGenerator):
            return generator.next_id()
        if self.shard_key is None:
            return generator.next_id(shard=random.randrange(generator.logical_shards))
        if shard_key_value is None:
            raise ShardKeyError(
                f"no id without a shard key: set {self.shard_key} first (the id carries "
                "its logical shard)"
            )
        return generator.next_id(shard=self.logical_shard_of_key(shard_key_value))

    def new_ids(self, count: int) -> list[Any]:
        generator = self.generator
        if isinstance(generator, ShardedIdGenerator):
            return [self.new_id() for _ in range(count)]
        return list(generator.next_ids(count))

    def column_default(self, context: DefaultExecutionContext) -> Any:
        """``insert_default`` for Core inserts: reads the row's shard key if needed."""
        if self.shard_key is None:
            return self.new_id()
        key = self.shard_key_column
        params = context.get_current_parameters()  # type: ignore[no-untyped-call]
        if key not in params or params[key] is None:
            raise ShardKeyError(
                f"insert without an id needs the shard key {key!r} in each row, to "
                "choose the id's logical shard"
            )
        return self.new_id(params[key])

    def __repr__(self) -> str:
        return f"<FieldConfig {self.kind} {self.generator!r} route={self.route!r}>"


def field_config(column: Any) -> FieldConfig | None:
    """The uid configuration of a column (or of the column an ORM attribute wraps)."""
    for candidate in getattr(column, "proxy_set", (column,)):
        if isinstance(candidate, Column):
            config = candidate.info.get(INFO_KEY)
            if isinstance(config, FieldConfig):
                return config
    return None


_OWNED = ("default", "insert_default", "default_factory")


def _column(
    type_: Any, config: FieldConfig, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> MappedColumn[Any]:
    owned = [name for name in _OWNED if name in kwargs]
    if owned:
        raise TypeError(f"the field makes its own ids; do not pass {', '.join(owned)}")
    info = dict(kwargs.pop("info", None) or {})
    info[INFO_KEY] = config
    if config.client_side:
        kwargs["insert_default"] = config.column_default
    if args and isinstance(args[0], str):  # a column name comes before the type
        return mapped_column(args[0], type_, *args[1:], info=info, **kwargs)
    return mapped_column(type_, *args, info=info, **kwargs)


def SnowflakeField(
    *args: Any, generator: IntIdGenerator, route: Route | None = None, **kwargs: Any
) -> MappedColumn[Any]:
    """A ``BIGINT`` snowflake id column: ``id: Mapped[int] = SnowflakeField(generator=g)``.

    ``route`` says how an id names its logical shard; the default is the generator's
    natural one (a mixed modulo for snowflakes, the server digit for decimal ids).
    Other arguments go to ``mapped_column`` (``primary_key=True``, ``init=False``...).
    """
    layout = getattr(generator, "layout", None)
    if not isinstance(layout, IntLayout) or not callable(getattr(generator, "next_id", None)):
        raise TypeError(f"generator must make integer ids of a layout, got {generator!r}")
    config = FieldConfig("snowflake", generator=generator, route=route or route_for(generator))
    return _column(SnowflakeType(layout), config, args, kwargs)


def ShardedBigIntField(
    *args: Any,
    generator: ShardedIdGenerator | None = None,
    shard_key: str | None = None,
    database_ids: DatabaseIds | None = None,
    **kwargs: Any,
) -> MappedColumn[Any]:
    """An Instagram-style id that carries its logical shard.

    With ``shard_key="owner_id"`` the shard is ``owner_id % 2**shard_bits``, so all rows
    of one owner share a database. With ``database_ids`` PostgreSQL makes the ids
    (``server_default``) and Python only decodes and routes them.
    """
    if (generator is None) == (database_ids is None):
        raise TypeError("give exactly one of generator= or database_ids=")
    layout: SnowflakeLayout
    if generator is not None:
        if not isinstance(generator, ShardedIdGenerator):
            raise TypeError(f"generator must be a ShardedIdGenerator, got {generator!r}")
        layout = generator.layout
        route: Route = route_for(generator)
    else:
        assert database_ids is not None
        layout = database_ids.layout
        route = ByField(layout, database_ids.shard_field)
        if "server_default" in kwargs:
            raise TypeError("database_ids= sets the server_default itself")
        kwargs["server_default"] = database_ids.server_default()
    config = FieldConfig(
        "sharded",
        generator=generator,
        route=route,
        shard_key=shard_key,
        database_ids=database_ids,
    )
    return _column(SnowflakeType(layout), config, args, kwargs)


def LocalityUUIDField(
    *args: Any,
    generator: LocalityUUIDGenerator,
    route: Route | None = None,
    **kwargs: Any,
) -> MappedColumn[Any]:
    """A locality UUID column: ``id: Mapped[uuid.UUID] = LocalityUUIDField(generator=g)``.

    Routes by the counter block (the first 32 bits) unless ``route`` says otherwise.
    """
    if not isinstance(generator, LocalityUUIDGenerator):
        raise TypeError(f"generator must be a LocalityUUIDGenerator, got {generator!r}")
    config = FieldConfig("locality", generator=generator, route=route or route_for(generator))
    return _column(LocalityUUIDType(), config, args, kwargs)
