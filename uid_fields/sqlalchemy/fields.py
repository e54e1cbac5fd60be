"""Field constructors: ``mapped_column`` objects whose ids exist from construction on.

Each field records its generator and routing in ``Column.info`` (not on the type, so
foreign keys that copy the type stay plain). The ORM side assigns ids when objects are
built (see ``listeners``); the column's ``insert_default`` covers Core ``insert()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import MappedColumn, mapped_column
from sqlalchemy.sql.schema import Column

from ..errors import ShardKeyError
from ..ids.generators import ShardedIdGenerator
from ..ids.layouts import IntLayout, SnowflakeLayout
from ..ids.locality import LocalityUUIDGenerator
from ..ids.public import PublicIds
from ..ids.uniqid import UniqIdGenerator
from ..placement import ByField, KeyHash, Placement, Route, ShardMap, route_for
from .ddl import DatabaseIds
from .types import LocalityUUIDType, SnowflakeType, UniqIdType

__all__ = [
    "INFO_KEY",
    "ROUTER_OPTION",
    "SHARD_OPTION",
    "FieldConfig",
    "LocalityUUIDField",
    "ShardedBigIntField",
    "SnowflakeField",
    "field_config",
]

INFO_KEY = "uid_fields"
#: Execution options of a connection that writes one shard only (a data migration,
#: ``alembic.run_migrations_on_shards``): the shard's name and the router placing the
#: tables. With both, a Core insert without an id gets one of that shard.
SHARD_OPTION = "uid_fields_shard"
ROUTER_OPTION = "uid_fields_router"
Kind = Literal["snowflake", "sharded", "locality", "uniqid"]


class IntIdGenerator(Protocol):
    """What ``SnowflakeField`` needs of a generator: a layout to read, integer ids.

    ``layout`` is a read-only property here: a generator whose layout is a
    ``SnowflakeLayout`` (or ``DecimalLayout``) attribute matches it, which a mutable
    ``IntLayout`` attribute would not (mutable protocol members are invariant).
    """

    @property
    def layout(self) -> IntLayout: ...

    def next_id(self) -> int: ...

    def next_ids(self, count: int) -> list[int]: ...


DefaultMap = Callable[["FieldConfig"], ShardMap | None]

# Placements kept per column (one per map it is used with): sessions share their default
# maps, so a handful is the usual count; the bound only guards against maps made anew.
_PLACEMENTS_KEPT = 64


class FieldConfig:
    """What a uid column knows: how to make its ids and how they route.

    Placement itself (which logical shard, which database) is the core's
    ``uid_fields.placement.Placement``: ``placement`` is this column's own (its ``shards``
    map, or none until a session supplies one), used to make ids when objects are built;
    a session asks ``placement_for`` with its own default map.
    """

    def __init__(
        self,
        kind: Kind,
        *,
        generator: Any,
        route: Route,
        shard_key: str | None = None,
        database_ids: DatabaseIds | None = None,
        shards: ShardMap | None = None,
        key_hash: KeyHash | None = None,
    ) -> None:
        if shards is not None and not isinstance(shards, ShardMap):
            raise TypeError(f"shards must be a ShardMap, got {shards!r}")
        self.kind = kind
        self.generator = generator
        self.route = shards.route if shards is not None else route
        self.shard_key = shard_key  # attribute name on the mapped class
        self.shard_key_column: str | None = shard_key  # column key, fixed once mapped
        self.database_ids = database_ids
        self.shard_map = shards
        self.key_hash = key_hash
        self.column: Column[Any] | None = None  # set when the class is mapped
        self._placements: dict[tuple[ShardMap | None, Placement | None], Placement] = {}
        self._parent: tuple[FieldConfig | None] | None = None  # parent_config, once known
        if shards is not None:
            self.placement_for()  # a map that cannot read these ids fails here

    @property
    def client_side(self) -> bool:
        return self.generator is not None

    @property
    def name(self) -> str:
        column = self.column
        return f"{column.table.name}.{column.key}" if column is not None else self.kind

    @property
    def key_name(self) -> str | None:
        """The shard key column as errors name it (``photos.owner_id``)."""
        column, key = self.column, self.shard_key_column
        if key is None:
            return None
        return f"{column.table.name}.{key}" if column is not None else key

    def mapped(self, column: Column[Any], shard_key_column: str | None) -> None:
        """The column and key column, once the class is mapped: placements made before
        (a field with its own ``shards``) named neither, so they are made again."""
        self.column = column
        self.shard_key_column = shard_key_column
        self._placements.clear()
        self._parent = None

    def parent_config(self) -> FieldConfig | None:
        """The uid field of the row this column's shard key points at (co-location).

        Asked for every object built: kept once every foreign key of the key column
        could be read (a referenced table not in the metadata yet is asked again)."""
        known = self._parent
        if known is not None:
            return known[0]
        column = self.column
        if column is None or self.shard_key_column is None:
            return None
        key_column = column.table.columns.get(self.shard_key_column)
        settled = True
        for foreign_key in getattr(key_column, "foreign_keys", ()):
            try:
                target = foreign_key.column
            except Exception:  # the referenced table is not in this metadata (yet)
                settled = False
                continue
            config = field_config(target)
            if config is not None:
                self._parent = (config,)
                return config
        if settled:
            self._parent = (None,)
        return None

    def placement_for(self, default_map: DefaultMap | None = None) -> Placement:
        """The core placement of this column: its own map, else ``default_map(self)``.

        ``default_map`` gives any column its session's default (the parent of a
        co-located child gets the parent's own, not the child's).
        """
        shard_map = self.shard_map
        if shard_map is None and default_map is not None:
            shard_map = default_map(self)
        parent = self.parent_config()
        parent_placement = parent.placement_for(default_map) if parent is not None else None
        key = (shard_map, parent_placement)
        found = self._placements.get(key)
        if found is None:
            found = Placement(
                self.generator,
                shard_map,
                route=self.route,
                parent=parent_placement,
                key_hash=self.key_hash,
                name=self.name,
                key_name=self.key_name,
                embeds_shard=self.kind == "sharded",
            )
            if len(self._placements) >= _PLACEMENTS_KEPT:
                self._placements.pop(next(iter(self._placements)))
            self._placements[key] = found
        return found

    @property
    def placement(self) -> Placement:
        return self.placement_for(None)

    def new_id(self, shard_key_value: object = None) -> Any:
        """A fresh id; sharded fields with a shard key need its value."""
        if self.generator is None:
            raise TypeError("ids of this column are made by the database")
        if self.shard_key is not None and shard_key_value is None:
            raise ShardKeyError(
                f"no id without a shard key: set {self.shard_key} first (the id carries "
                "its logical shard)"
            )
        return self.placement.new_id(shard_key_value)

    def column_default(self, context: DefaultExecutionContext) -> Any:
        """``insert_default`` for Core inserts: reads the row's shard key if needed.

        On a connection that writes one shard only (its execution options name the
        shard and the router, as ``run_migrations_on_shards`` sets them), an id of THAT
        shard: the connection cannot store a row anywhere else, and an id made for
        another would be refused by the write guard, or land where no read finds it.
        """
        shard_key = None
        if self.shard_key is not None:
            key = self.shard_key_column
            params = context.get_current_parameters()  # type: ignore[no-untyped-call]
            if key not in params or params[key] is None:
                raise ShardKeyError(
                    f"insert without an id needs the shard key {key!r} in each row, to "
                    "choose the id's logical shard"
                )
            shard_key = params[key]
        options = context.execution_options
        shard, router = options.get(SHARD_OPTION), options.get(ROUTER_OPTION)
        if shard is not None and router is not None and self.column is not None:
            route = router.table_route(self.column.table)
            if route is not None and not route.by_parent and route.config is self:
                return route.placement.new_id_on(shard, shard_key)
        return self.new_id(shard_key)

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
    # Never SERIAL/IDENTITY: a migration renders no Python default, and an integer primary
    # key left on "auto" becomes BIGSERIAL, which accepts rows without an id (id 1, the
    # epoch). Said explicitly, Alembic renders it too.
    kwargs.setdefault("autoincrement", False)
    if config.client_side:
        kwargs["insert_default"] = config.column_default
    if args and isinstance(args[0], str):  # a column name comes before the type
        return mapped_column(args[0], type_, *args[1:], info=info, **kwargs)
    return mapped_column(type_, *args, info=info, **kwargs)


def SnowflakeField(
    *args: Any,
    generator: IntIdGenerator,
    route: Route | None = None,
    shards: ShardMap | None = None,
    public_ids: PublicIds | None = None,
    **kwargs: Any,
) -> MappedColumn[Any]:
    """A ``BIGINT`` snowflake id column: ``id: Mapped[int] = SnowflakeField(generator=g)``.

    ``route`` says how an id names its logical shard; the default is the generator's
    natural one (a mixed modulo for snowflakes, the server digit for decimal ids).
    ``shards`` places the rows by this column's own map (for example one built by
    ``UidConfig.shard_map``); without it a session's default map is used, and a table
    with a foreign key to a sharded table lives with that parent instead.
    ``public_ids=PublicIds("ord", keys)`` gives the ids public tokens:
    ``select(Order).where(Order.id.public == token)`` compiles to the stored id (and so
    routes), ``Order.id.public_decode(token)`` is the id, ``Order.id.public_encode(id)``
    the token. Other arguments go to ``mapped_column`` (``primary_key=True``,
    ``init=False``...).
    """
    layout = getattr(generator, "layout", None)
    if not isinstance(layout, IntLayout) or not callable(getattr(generator, "next_id", None)):
        raise TypeError(f"generator must make integer ids of a layout, got {generator!r}")
    config = FieldConfig(
        "snowflake", generator=generator, route=route or route_for(generator), shards=shards
    )
    return _column(SnowflakeType(layout, public_ids=public_ids), config, args, kwargs)


def ShardedBigIntField(
    *args: Any,
    generator: ShardedIdGenerator | None = None,
    shard_key: str | None = None,
    database_ids: DatabaseIds | None = None,
    shards: ShardMap | None = None,
    key_hash: KeyHash | None = None,
    public_ids: PublicIds | None = None,
    **kwargs: Any,
) -> MappedColumn[Any]:
    """An Instagram-style id that carries its logical shard.

    With ``shard_key="owner_id"`` every row of one owner gets the logical shard the core
    picks for that key (``uid_fields.placement``), so they share a database; when the key
    is a foreign key to a sharded table, the row lives on its parent's database. With
    ``database_ids`` PostgreSQL makes the ids (``server_default``) and Python only decodes
    and routes them. ``public_ids=`` gives them public tokens, as for ``SnowflakeField``.
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
        shards=shards,
        key_hash=key_hash,
    )
    return _column(SnowflakeType(layout, public_ids=public_ids), config, args, kwargs)


def LocalityUUIDField(
    *args: Any,
    generator: LocalityUUIDGenerator,
    route: Route | None = None,
    shards: ShardMap | None = None,
    public_ids: PublicIds | None = None,
    **kwargs: Any,
) -> MappedColumn[Any]:
    """A locality UUID column: ``id: Mapped[uuid.UUID] = LocalityUUIDField(generator=g)``.

    Routes by the counter block (the first 32 bits) unless ``route`` says otherwise.
    ``public_ids=`` as for ``SnowflakeField`` (tokens of 33 characters after the prefix).
    """
    if not isinstance(generator, LocalityUUIDGenerator):
        raise TypeError(f"generator must be a LocalityUUIDGenerator, got {generator!r}")
    config = FieldConfig(
        "locality", generator=generator, route=route or route_for(generator), shards=shards
    )
    return _column(LocalityUUIDType(public_ids=public_ids), config, args, kwargs)


def UniqIdField(
    *args: Any,
    generator: UniqIdGenerator,
    route: Route | None = None,
    shards: ShardMap | None = None,
    **kwargs: Any,
) -> MappedColumn[Any]:
    """A shard-prefixed uniqid column: ``id: Mapped[str] = UniqIdField(generator=g)``.

    Routes by the leading shard digit unless ``route`` says otherwise, as Django's
    ``UniqIdField`` does.
    """
    if not isinstance(generator, UniqIdGenerator):
        raise TypeError(f"generator must be a UniqIdGenerator, got {generator!r}")
    config = FieldConfig(
        "uniqid", generator=generator, route=route or route_for(generator), shards=shards
    )
    return _column(UniqIdType(generator.total_shards), config, args, kwargs)
