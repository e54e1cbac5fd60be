"""``shard_move(session, tables, ...)``: the SQLAlchemy side of ``uid_fields.moves``.

Each table becomes a ``RowStore`` over Core statements on the shards' engines; the
session only says how its rows are placed (``session.router``). The new server is
usually not a shard of the session yet: pass its engine in ``engines``. After the new
map is deployed the session's shards name the target, and ``engines`` gives the source.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Column, and_, bindparam, func, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.ddl import sort_tables

from ..ids.layouts import IntLayout
from ..ops.moves import MovedTable, Row, ShardMove
from ..placement import allow_off_shard_writes
from .fields import field_config
from .routing import TableRoute, table_of
from .session import ShardedIdSession

__all__ = ["TableRows", "shard_move"]


class TableRows:
    """A table's rows on any engine, as tuples of column values (primary key first)."""

    integrity_error = IntegrityError

    def __init__(self, engines: Mapping[str, Engine], route: TableRoute) -> None:
        table = route.table
        keys = list(table.primary_key.columns)
        if len(keys) != 1:
            raise ValueError(f"{table.name}: a move needs a one-column primary key")
        self.engines = engines
        self.table = table
        self.key = keys[0]
        self.columns: list[Column[Any]] = [
            self.key,
            *(c for c in table.columns if c is not keys[0]),
        ]
        self.label = table.name
        self.route_index = self.columns.index(route.column)
        self._route = route.column
        self._open: dict[str, Connection] = {}
        self.table_name, self.route_column = table.name, str(route.column.name)

    def vendor(self, database: str) -> str:
        name = self.engines[database].dialect.name
        return "mysql" if name == "mariadb" else name

    def run(self, database: str, statements: Sequence[str]) -> list[Row]:
        """The fence's SQL, in one transaction. The drivers read ``%`` as a placeholder
        even without parameters (psycopg, PyMySQL): it is doubled for them."""
        rows: list[Row] = []
        engine = self.engines[database]
        percent = "%%" if engine.dialect.paramstyle in ("format", "pyformat") else "%"
        with engine.begin() as connection:
            for statement in statements:
                result = connection.exec_driver_sql(statement.replace("%", percent))
                rows = [tuple(r) for r in result] if result.returns_rows else []
        return rows

    def column_sql(self, database: str) -> str:
        preparer = self.engines[database].dialect.identifier_preparer
        return f"{preparer.format_table(self.table)}.{preparer.quote(self._route.name)}"

    def _criteria(self, after: Any, upto: Any, where: str | None) -> Any:
        found = [text(where)] if where else []
        if after is not None:
            found.append(self.key > after)
        if upto is not None:
            found.append(self.key <= upto)
        return and_(True, *found)

    def read(
        self, database: str, *, after: Any, upto: Any, limit: int, where: str | None
    ) -> list[Row]:
        statement = (
            select(*self.columns)
            .where(self._criteria(after, upto, where))
            .order_by(self.key)
            .limit(limit)
        )
        with self.engines[database].connect() as connection:
            return [tuple(row) for row in connection.execute(statement)]

    def count(self, database: str, where: str | None) -> int:
        statement = select(func.count()).select_from(self.table)
        if where:
            statement = statement.where(text(where))
        with self.engines[database].connect() as connection:
            return int(connection.execute(statement).scalar_one())

    @contextmanager
    def writing(self, database: str) -> Iterator[Connection]:
        with self.engines[database].begin() as connection:
            self._open[database] = connection
            try:
                yield connection
            finally:
                del self._open[database]

    def _values(self, rows: Sequence[Row]) -> list[dict[str, Any]]:
        return [{c.key: v for c, v in zip(self.columns, row, strict=True)} for row in rows]

    def insert(self, database: str, rows: Sequence[Row]) -> None:
        with allow_off_shard_writes():  # a deliberate copy: the guard lets it through
            self._open[database].execute(self.table.insert(), self._values(rows))

    def update(self, database: str, rows: Sequence[Row]) -> None:
        """One UPDATE by primary key, sent once for the batch (executemany)."""
        others = self.columns[1:]
        if not others:
            return
        # bound names of their own: SQLAlchemy reserves the columns' names in values()
        statement = (
            self.table.update()
            .where(self.key == bindparam("uid_key"))
            .values({c.key: bindparam(f"uid_{i}") for i, c in enumerate(others)})
        )
        batch = [
            {"uid_key": row[0], **{f"uid_{i}": v for i, v in enumerate(row[1:])}} for row in rows
        ]
        self._open[database].execute(statement, batch)

    def delete(self, database: str, keys: Sequence[Any]) -> None:
        statement = self.table.delete().where(self.key.in_(list(keys)))
        self._open[database].execute(statement)


def _key_layout(route: TableRoute) -> IntLayout | None:
    """The layout of a table's primary keys, when they carry their time."""
    config = field_config(next(iter(route.table.primary_key.columns)))
    layout = getattr(getattr(config, "generator", None), "layout", None)
    return layout if isinstance(layout, IntLayout) else None


def shard_move(
    session: ShardedIdSession,
    tables: Iterable[Any],
    *,
    source: str,
    target: str,
    engines: Mapping[str, Engine] | None = None,
    low: int | None = None,
    high: int | None = None,
    state: str | Path | None = None,
    **options: Any,
) -> ShardMove:
    """A ``ShardMove`` of logical shards ``low:high`` (default: all of the source's)
    for ``tables`` (mapped classes or tables, put parents first here), placed as
    ``session`` places them. ``engines`` adds databases that are not shards of the
    session (the new server before the switch, the old one after)."""
    every = {**session._engines, **(engines or {})}
    for name in (source, target):
        if name not in every:
            raise ValueError(f"no engine for {name!r}: pass it in engines=")
    moved = []
    for table in sort_tables({table_of(t) for t in tables}):
        route = session.router.table_route(table)
        if route is None:
            raise ValueError(f"{table.name}: not sharded by a uid field of this session")
        moved.append(MovedTable(TableRows(every, route), route.placement, _key_layout(route)))
    return ShardMove(
        moved, source=source, target=target, low=low, high=high, state=state, **options
    )
