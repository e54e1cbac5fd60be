"""The lease databases the lease tests run on: SQLite, PostgreSQL and MariaDB.

``db`` (registered in ``tests/core/conftest.py``) gives each test a fresh lease table on
each of the three, made by ``DatabaseLease.create_table()`` and dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import services
from uid_fields import DatabaseLease


@dataclass
class Database:
    url: str
    table: str
    execute: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]

    def lease(self, name: str = "orders", ttl: float = 5, **options: Any) -> DatabaseLease:
        return DatabaseLease(self.url, name, ttl, table=self.table, **options)


def sqlite_database(tmp_path: Path) -> Iterator[Database]:
    import sqlite3

    path = tmp_path / "leases.sqlite3"

    def execute(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as conn:
            return list(conn.execute(sql.replace("%s", "?"), params).fetchall())

    yield Database(f"sqlite:///{path}", "uid_fields_worker_lease", execute)


def postgres_database(tmp_path: Path) -> Iterator[Database]:
    conn = services.postgres_connection()
    table = f"uidf_lease_{uuid.uuid4().hex[:12]}"

    def execute(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        cursor = conn.execute(sql, params)  # type: ignore[arg-type]
        return list(cursor.fetchall()) if cursor.description else []

    yield Database(services.POSTGRES_URL, table, execute)
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.close()


def mysql_database(tmp_path: Path) -> Iterator[Database]:
    conn = services.mysql_connection()
    conn.autocommit(True)
    conn.select_db("test")
    table = f"uidf_lease_{uuid.uuid4().hex[:12]}"

    def execute(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with conn.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())

    yield Database(services.MYSQL_URL, table, execute)
    execute(f"DROP TABLE IF EXISTS {table}", ())
    conn.close()


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    make = {
        "sqlite": sqlite_database,
        "postgresql": postgres_database,
        "mariadb": mysql_database,
    }[request.param]
    database = make(tmp_path)
    value = next(database)
    value.lease("setup").create_table()
    yield value
    next(database, None)
