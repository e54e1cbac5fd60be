"""The lease table for SQLAlchemy metadata (Alembic), and database leases over an Engine.

The columns come from ``uid_fields.leases.database.COLUMNS``, the one description of
the table, so this table, the DDL that ``DatabaseLease.create_table()`` runs and the
Django migration agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from ..ids.leases import DatabaseLease
from ..ids.leases.database import (
    COLUMNS,
    TABLE,
    UNIQUE,
    Column,
    dialect_of,
    identifier,
    marker_row,
)

__all__ = ["database_lease", "lease_factory", "lease_table"]


def _sa_column(column: Column) -> sa.Column[Any]:
    if column.type == "id":
        big = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite's rowid
        return sa.Column(column.name, big, primary_key=True)
    kinds: dict[str, sa.types.TypeEngine[Any]] = {
        "varchar": sa.String(column.length),
        "bigint": sa.BigInteger(),
        "integer": sa.Integer(),
    }
    return sa.Column(column.name, kinds[column.type], nullable=column.nullable)


def lease_table(metadata: sa.MetaData, table: str = TABLE) -> sa.Table:
    """The lease table as a ``Table`` in ``metadata`` (for ``create_all`` or Alembic).

    ``create_all`` also writes the state marker row dated 0: a table just made can hold
    no live lease, so the first claims need no quarantine. (An Alembic migration that
    creates the table should insert ``marker_row()`` the same way.)
    """
    made = sa.Table(
        identifier(table),
        metadata,
        *(_sa_column(column) for column in COLUMNS),
        sa.UniqueConstraint(*UNIQUE, name=f"{table}_{'_'.join(UNIQUE)}"),
    )
    sa.event.listen(made, "after_create", _insert_marker)
    return made


def _insert_marker(target: sa.Table, connection: sa.Connection, **kw: Any) -> None:
    connection.execute(target.insert().values(**marker_row()))


def database_lease(
    engine: sa.Engine,
    name: str,
    ttl: float = 10.0,
    *,
    margin: float | None = None,
    table: str = TABLE,
) -> DatabaseLease:
    """A lease over the lease table in ``engine``'s database.

    It takes connections from the engine's pool and commits its own transactions; a
    forked child drops the pool it inherited (without closing the parent's sockets).
    """
    return DatabaseLease(
        engine.raw_connection,
        name,
        ttl,
        margin=margin,
        table=table,
        dialect=dialect_of(engine.dialect.name),
        where=f"database {engine.url.render_as_string(hide_password=True)}",
        after_fork=lambda: engine.dispose(close=False),
    )


def lease_factory(
    engines: Mapping[str, sa.Engine], *, table: str = TABLE
) -> Callable[..., DatabaseLease]:
    """The ``database_lease`` factory that ``UidConfig`` takes: a settings lease
    ``{"lease": "database", "database": "<name>", ...}`` leases from ``engines[name]``."""

    def make(name: str, ttl: float, *, database: str, margin: float | None) -> DatabaseLease:
        try:
            engine = engines[database]
        except KeyError:
            raise ValueError(
                f"no engine {database!r} for a database lease (engines: {sorted(engines)})"
            ) from None
        return database_lease(engine, name, ttl, margin=margin, table=table)

    return make
