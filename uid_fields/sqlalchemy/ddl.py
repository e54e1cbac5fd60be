"""Database-side ids on PostgreSQL: Instagram's way, with the shared ``next_id`` DDL.

Each shard database gets its own ``uid_next_id()`` function that stamps that
database's logical shard into every id; the column's ``server_default`` calls it and
the ORM reads the id back with RETURNING. The same layout object decodes the ids, and
since a database stamps a logical shard it owns in the shard map, ``get()`` by id is
routed back to it. The DDL is ``uid_fields.sql.postgres.NextIdFunction``, the one the
Django migration operation installs, so both sides make identical ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import MetaData, Table, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import TextClause

from ..ids.layouts import DecimalLayout, SnowflakeLayout
from ..placement import ByField, ShardMap, stamped_logical_shard
from ..sql import DecimalIdFunction, NextIdFunction, installs
from ..sql.postgres import DEFAULT_MAX_AHEAD_MS, StateCheck

__all__ = ["DatabaseIds", "DecimalIds"]

ShardOf = Mapping[Engine, int] | Callable[[Connection], int]


class DatabaseIds:
    """The ``next_id`` function of one layout, installed per database with its shard."""

    def __init__(
        self,
        layout: SnowflakeLayout,
        *,
        name: str = "uid_next_id",
        shard_field: str = "shard",
        max_ahead_ms: int | None = DEFAULT_MAX_AHEAD_MS,
        language: str = "plpgsql",
    ) -> None:
        self.layout = layout
        self.name = name
        self.shard_field = shard_field
        self.max_ahead_ms = max_ahead_ms
        self.language = language
        self.function(0)  # validate the layout, name, field, bound and language now

    def function(self, shard: int) -> NextIdFunction:
        return NextIdFunction(
            self.layout,
            shard=shard,
            name=self.name,
            shard_field=self.shard_field,
            max_ahead_ms=self.max_ahead_ms,
            language=self.language,
        )

    def check_state(self, connection: Connection, tables: Iterable[str] = ()) -> StateCheck:
        """How far this database's state is ahead of its clock (``check-db`` in Django).

        ``tables``: the tables whose ``id`` the function fills here.
        """
        return self._on_cursor(connection, lambda f, cursor: f.check_state(cursor, tables))

    def reset_state(self, connection: Connection, tables: Iterable[str] = ()) -> StateCheck:
        """Bring a state that ran ahead of the clock back to now when no stored id in
        ``tables`` is later than now (``check-db --fix``); ``ValueError`` otherwise."""
        return self._on_cursor(connection, lambda f, cursor: f.reset_state(cursor, tables))

    def _on_cursor(
        self, connection: Connection, work: Callable[[NextIdFunction, Any], StateCheck]
    ) -> StateCheck:
        _require_postgres(connection)
        cursor = connection.connection.cursor()
        try:
            return work(self.function(0), cursor)
        finally:
            cursor.close()

    def batch_query(self) -> TextClause:
        """``count`` ids in one round trip (``:count`` bound), in the order they were made."""
        return text(f"SELECT {self.function(0).call} FROM generate_series(1, :count) ORDER BY 1")

    def server_default(self) -> TextClause:
        return text(self.function(0).call)

    def install(self, connection: Connection, shard: int) -> None:
        """Create (or replace) the function in this database; its state survives re-runs."""
        _require_postgres(connection)
        function = self.function(shard)
        existed = _exists(connection, function)
        for statement in function.create_statements():
            connection.execute(text(statement))  # text(): '%' escaped for the driver
        installs.installed(function, _where(connection), existed=existed)

    def uninstall(self, connection: Connection) -> None:
        _require_postgres(connection)
        function = self.function(0)
        for statement in function.drop_statements():
            connection.execute(text(statement))
        installs.dropped(function, _where(connection))

    def shard_map(self, databases: Iterable[str]) -> ShardMap:
        """The even spread of this layout's logical shards over ``databases`` (in order):
        the map a session uses for these ids when it is given none."""
        return ShardMap(list(databases), route=ByField(self.layout, self.shard_field))

    @staticmethod
    def shards_of(shard_map: ShardMap, engines: Mapping[str, Engine]) -> dict[Engine, int]:
        """Each engine's logical shard: the first of the range its database owns."""
        return {
            engines[name]: stamped_logical_shard(shard_map, name) for name in shard_map.databases
        }

    def attach(self, target: Table | MetaData, shard_of: ShardOf) -> None:
        """Install the function before ``target`` is created, drop it after it is dropped.

        ``shard_of`` gives the logical shard of the database a connection is on: a
        mapping by engine (see ``shards_of``) or a function of the connection.
        """
        _attach(target, shard_of, self.install, self.uninstall)

    def __repr__(self) -> str:
        return f"<DatabaseIds {self.name}() {self.layout!r}>"


class DecimalIds:
    """Decimal ids made by MySQL/MariaDB (``uid_fields.sql.DecimalIdFunction``).

    ``install(connection, server)`` creates ``name()`` stamping that server digit;
    ``column_default(server)`` is the same computation for a ``server_default``.
    ``DecimalIds.shards_of(shard_map, engines)`` gives each database the first server
    digit it owns, so ids route back to the database that made them.
    """

    shards_of = DatabaseIds.shards_of

    def __init__(self, layout: DecimalLayout, *, name: str = "uid_decimal_id") -> None:
        self.layout = layout
        self.name = name
        self.function(0)  # validate the layout and name now

    def function(self, server: int) -> DecimalIdFunction:
        return DecimalIdFunction(self.layout, server=server, name=self.name)

    def column_default(self, server: int) -> TextClause:
        return text(self.function(server).expression)

    def install(self, connection: Connection, server: int) -> None:
        _require_mysql(connection)
        function = self.function(server)
        existed = _exists(connection, function)
        for statement in function.create_statements():
            connection.exec_driver_sql(statement)
        installs.installed(function, _where(connection), existed=existed)

    def uninstall(self, connection: Connection) -> None:
        _require_mysql(connection)
        function = self.function(0)
        for statement in function.drop_statements():
            connection.exec_driver_sql(statement)
        installs.dropped(function, _where(connection))

    def attach(self, target: Table | MetaData, server_of: ShardOf) -> None:
        """Install the function before ``target`` is created, drop it after it is dropped."""
        _attach(target, server_of, self.install, self.uninstall)

    def __repr__(self) -> str:
        return f"<DecimalIds {self.name}() {self.layout!r}>"


def _attach(
    target: Table | MetaData,
    shard_of: ShardOf,
    install: Callable[[Connection, int], None],
    uninstall: Callable[[Connection], None],
) -> None:
    def shard(connection: Connection) -> int:
        if callable(shard_of):
            return shard_of(connection)
        try:
            return shard_of[connection.engine]
        except KeyError:
            raise LookupError(
                f"no logical shard is configured for {connection.engine.url!r}"
            ) from None

    def before_create(target: Any, connection: Connection, **kw: Any) -> None:
        install(connection, shard(connection))

    def after_drop(target: Any, connection: Connection, **kw: Any) -> None:
        uninstall(connection)

    event.listen(target, "before_create", before_create)
    event.listen(target, "after_drop", after_drop)


def _exists(connection: Connection, function: installs.IdFunction) -> bool:
    sql, params = installs.exists_query(function)
    return bool(connection.exec_driver_sql(sql, params).scalar())


def _where(connection: Connection) -> str:
    """The database a connection is on, as log lines name it (no password)."""
    return connection.engine.url.render_as_string(hide_password=True)


def _require_mysql(connection: Connection) -> None:
    if connection.dialect.name not in ("mysql", "mariadb"):
        raise NotImplementedError(
            f"database-made decimal ids need MySQL or MariaDB, not {connection.dialect.name}"
        )


def _require_postgres(connection: Connection) -> None:
    if connection.dialect.name != "postgresql":
        raise NotImplementedError(
            f"database-side ids need PostgreSQL, not {connection.dialect.name}; "
            "generate ids in Python there (the field's generator=)"
        )
