"""Shards for the SQLAlchemy tests: 4 SQLite files, 4 PostgreSQL and 4 MariaDB databases.

Databases are created once per session and dropped at the end; tables are created and
dropped around each test that asks for a backend, so every test starts empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, make_url, text
from sqlalchemy.engine import Engine

from tests.services import MYSQL_URL, POSTGRES_URL, database_name, unavailable
from uid_fields.ops import parallel
from uid_fields.sqlalchemy import bulk_insert, sharded_session

from .models import Base, Order

SHARDS = [f"shard_{i}" for i in range(4)]
DATABASES = [database_name("uidf_sa", i) for i in range(4)]


def postgres_url(database: str, driver: str = "psycopg") -> str:
    url = make_url(POSTGRES_URL).set(drivername=f"postgresql+{driver}", database=database)
    return url.render_as_string(hide_password=False)


def mysql_url(database: str | None) -> str:
    url = make_url(MYSQL_URL).set(drivername="mysql+pymysql", database=database)
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def sqlite_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Engine]]:
    folder: Path = tmp_path_factory.mktemp("sqlite_shards")
    engines = {name: create_engine(f"sqlite:///{folder / name}.db") for name in SHARDS}
    yield engines
    for engine in engines.values():
        engine.dispose()


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[list[str]]:
    try:
        admin = create_engine(postgres_url("postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            for name in DATABASES:
                connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                connection.execute(text(f"CREATE DATABASE {name}"))
    except Exception as error:  # pragma: no cover - depends on the machine
        unavailable("PostgreSQL", error)
    yield DATABASES
    with admin.connect() as connection:
        for name in DATABASES:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(scope="session")
def postgres_engines(postgres_databases: list[str]) -> Iterator[dict[str, Engine]]:
    engines = {
        name: create_engine(postgres_url(database))
        for name, database in zip(SHARDS, postgres_databases, strict=True)
    }
    yield engines
    for engine in engines.values():
        engine.dispose()


@contextmanager
def postgres_orders(
    engines: dict[str, Engine], customers: list[str]
) -> Iterator[dict[str, Engine]]:
    """The shards' tables made anew with one order per customer name, the fan-out pool
    started afresh; dropped again after (for the PostgreSQL-only fan-out tests)."""
    for engine in engines.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    parallel.shutdown()
    with sharded_session(engines) as session:
        bulk_insert(session, Order, [{"customer": name} for name in customers])
        session.commit()
    try:
        yield engines
    finally:
        parallel.shutdown()
        for engine in engines.values():
            Base.metadata.drop_all(engine)


@pytest.fixture(scope="session")
def mariadb_engines() -> Iterator[dict[str, Engine]]:
    try:
        admin = create_engine(mysql_url(None))
        with admin.connect() as connection:
            for name in DATABASES:
                connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
                connection.execute(text(f"CREATE DATABASE {name}"))
    except Exception as error:  # pragma: no cover
        unavailable("MariaDB", error)
    engines = {
        name: create_engine(mysql_url(database))
        for name, database in zip(SHARDS, DATABASES, strict=True)
    }
    yield engines
    for engine in engines.values():
        engine.dispose()
    with admin.connect() as connection:
        for name in DATABASES:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def shards(request: pytest.FixtureRequest) -> Iterator[dict[str, Engine]]:
    """Four shard engines of one backend, with the test models' tables, empty."""
    engines: dict[str, Engine] = request.getfixturevalue(
        {
            "sqlite": "sqlite_engines",
            "postgresql": "postgres_engines",
            "mariadb": "mariadb_engines",
        }[request.param]
    )
    for engine in engines.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    yield engines
    for engine in engines.values():
        Base.metadata.drop_all(engine)


@pytest.fixture
def sqlite_shards(sqlite_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    for engine in sqlite_engines.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    yield sqlite_engines
    for engine in sqlite_engines.values():
        Base.metadata.drop_all(engine)


class StatementLog:
    """Statements sent to each engine, as the driver saw them (executemany counts once)."""

    def __init__(self, names: list[str]) -> None:
        self.statements: dict[str, list[tuple[str, bool]]] = {name: [] for name in names}

    def count(self, name: str | None = None, kind: str | None = None) -> int:
        names = [name] if name is not None else list(self.statements)
        return sum(
            1
            for n in names
            for sql, _many in self.statements[n]
            if kind is None or sql.lstrip().upper().startswith(kind)
        )

    def engines_used(self, kind: str | None = None) -> set[str]:
        return {name for name in self.statements if self.count(name, kind)}

    def sql(self, kind: str) -> list[str]:
        return [
            s
            for stmts in self.statements.values()
            for s, _ in stmts
            if s.lstrip().upper().startswith(kind)
        ]

    def clear(self) -> None:
        for log in self.statements.values():
            log.clear()


@contextmanager
def recording(engines: dict[str, Engine]) -> Iterator[StatementLog]:
    log = StatementLog(list(engines))
    listeners: list[tuple[Engine, Callable[..., None]]] = []
    for name, engine in engines.items():

        def before(conn, cursor, statement, parameters, context, executemany, _name=name):  # type: ignore[no-untyped-def]
            log.statements[_name].append((statement, executemany))

        event.listen(engine, "before_cursor_execute", before)
        listeners.append((engine, before))
    try:
        yield log
    finally:
        for engine, fn in listeners:
            event.remove(engine, "before_cursor_execute", fn)


@pytest.fixture
def record() -> Callable[[dict[str, Engine]], object]:
    return recording
