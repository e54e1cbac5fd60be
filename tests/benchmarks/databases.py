"""Databases: insert time by primary key type, index size, routed gets, database-side ids.

Each benchmark creates its own ``uidf_bench_*`` databases and drops them at the end.
Ids are generated inside the timed part wherever the application makes them, since
that is part of what a Snowflake or UUID key costs.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from uid_fields import INSTAGRAM, TWITTER, LocalityUUIDGenerator, SnowflakeGenerator
from uid_fields.ops import parallel
from uid_fields.sql.postgres import NextIdFunction

from . import keyed_writes
from .harness import Section, alternate, median, timed

__all__ = [
    "KEYS",
    "run_django",
    "run_index_size",
    "run_mysql",
    "run_pg_functions",
    "run_sqla",
    "run_sqla_flush",
    "run_sqla_routing",
]

POSTGRES_URL = os.environ.get(
    "UID_FIELDS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
MYSQL_URL = os.environ.get("UID_FIELDS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
EPOCH_2024 = 1704067200000
LAYOUT = TWITTER.replace(epoch_ms=EPOCH_2024)
SHARDS = 8

# Primary key kinds, in table order: how each makes its ids in the application.
KEYS = ("snowflake", "identity", "uuid4", "locality_variable", "locality_sequential")
LABELS = {
    "snowflake": "Snowflake bigint",
    "identity": "BigAutoField / identity",
    "uuid4": "uuid4",
    "locality_variable": "locality UUID (variable)",
    "locality_sequential": "locality UUID (sequential)",
}


def _url_with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _pg_admin() -> Any:
    import psycopg

    return psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5)


@contextmanager
def pg_databases(*names: str) -> Iterator[list[str]]:
    """Fresh PostgreSQL databases, dropped afterwards; yields their psycopg URLs."""
    with _pg_admin() as admin:
        for name in names:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name}")
    try:
        yield [_url_with_db(POSTGRES_URL, name) for name in names]
    finally:
        with _pg_admin() as admin:
            for name in names:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _generators() -> dict[str, Any]:
    return {
        "snowflake": SnowflakeGenerator(LAYOUT, datacenter=1, worker=1),
        "locality_variable": LocalityUUIDGenerator(),
        "locality_sequential": LocalityUUIDGenerator(sequential=True),
    }


def _make_ids(kind: str, generators: dict[str, Any], count: int) -> list[Any] | None:
    if kind == "identity":
        return None
    if kind == "uuid4":
        return [uuid.uuid4() for _ in range(count)]
    ids: list[Any] = generators[kind].next_ids(count)
    return ids


def _ratio_rows(times: dict[str, float], base: str) -> list[list[Any]]:
    return [
        [LABELS[kind], f"{times[kind]:.2f}", f"{times[kind] / times[base]:.2f}x"] for kind in times
    ]


# -- SQLAlchemy Core ----------------------------------------------------------------------
def _sqla_tables(metadata: Any, dialect: str) -> dict[str, Any]:
    import sqlalchemy as sa

    tables = {}
    for kind in KEYS:
        if kind == "identity":
            id_col = sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True)
            if dialect == "mysql":
                id_col = sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True)
        elif kind == "snowflake":
            id_col = sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False)
        else:
            id_col = sa.Column("id", sa.Uuid, primary_key=True)
        tables[kind] = sa.Table(
            f"core_{kind}",
            metadata,
            id_col,
            sa.Column("n", sa.Integer, nullable=False),
            sa.Column("note", sa.String(40), nullable=False),
        )
    return tables


def _core_insert(
    engine: Any, table: Any, kind: str, generators: dict[str, Any], rows: int
) -> float:
    import sqlalchemy as sa

    with engine.begin() as conn:
        conn.execute(
            sa.delete(table)
            if engine.dialect.name == "mysql"
            else sa.text(f"TRUNCATE {table.name}")
        )

    def insert() -> None:
        ids = _make_ids(kind, generators, rows)
        if ids is None:
            params = [{"n": i, "note": "benchmark row"} for i in range(rows)]
        else:
            params = [{"id": v, "n": i, "note": "benchmark row"} for i, v in enumerate(ids)]
        with engine.begin() as conn:
            for start in range(0, rows, 10_000):
                conn.execute(sa.insert(table), params[start : start + 10_000])

    return timed(insert)


def _clustered_sizes_mysql(engine: Any, tables: dict[str, Any]) -> dict[str, int]:
    import sqlalchemy as sa

    sizes = {}
    with engine.begin() as conn:
        for kind, table in tables.items():
            conn.execute(sa.text(f"ANALYZE TABLE {table.name}"))
            sizes[kind] = conn.execute(
                sa.text(
                    "SELECT data_length FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name = :t"
                ),
                {"t": table.name},
            ).scalar_one()
    return sizes


def _run_core(
    url: str, rows: int, rounds: int, title: str, key: str
) -> tuple[Section, dict[str, float]]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    dialect = "mysql" if url.startswith("mysql") else "postgresql"
    tables = _sqla_tables(metadata, dialect)
    metadata.create_all(engine)
    generators = _generators()
    try:
        samples = alternate(
            [
                (kind, _bind(_core_insert, engine, tables[kind], kind, generators, rows))
                for kind in KEYS
            ],
            rounds,
        )
        times = {kind: median(samples[kind]) for kind in KEYS}
        rows_out = _ratio_rows(times, "identity")
        columns = ["primary key", f"{rows // 1000}k rows, s", "vs identity"]
        notes: list[str] = []
        if dialect == "mysql":
            sizes = _clustered_sizes_mysql(engine, tables)
            for row, kind in zip(rows_out, KEYS, strict=True):
                row.append(f"{sizes[kind] / 2**20:.1f}")
            columns.append("clustered index MiB (InnoDB)")
            notes.append(
                "InnoDB stores the rows in the primary key, so the clustered index size is "
                "the table size; uuid columns are MariaDB's native UUID type."
            )
        return Section(key, title, columns, rows_out, notes), times
    finally:
        metadata.drop_all(engine)
        engine.dispose()


def _bind(fn: Callable[..., float], *args: Any) -> Callable[[], float]:
    return lambda: fn(*args)


def run_sqla(rows: int = 100_000, rounds: int = 3) -> tuple[list[Section], dict[str, Any]]:
    with pg_databases("uidf_bench_core") as (url,):
        section, times = _run_core(
            url.replace("postgresql://", "postgresql+psycopg://", 1),
            rows,
            rounds,
            f"SQLAlchemy Core insert of {rows:,} rows, PostgreSQL",
            "sqla_pg",
        )
    return [section], {"sqla_pg": times}


def _mysql_params() -> dict[str, Any]:
    """pymysql's connection arguments for ``MYSQL_URL``."""
    parts = urlsplit(MYSQL_URL)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": parts.username or "root",
        "password": parts.password or "",
    }


def run_mysql(rows: int = 100_000, rounds: int = 3) -> tuple[list[Section], dict[str, Any]]:
    import pymysql

    params = _mysql_params()
    admin = pymysql.connect(**params, autocommit=True)
    try:
        with admin.cursor() as cursor:
            cursor.execute("DROP DATABASE IF EXISTS uidf_bench_core")
            cursor.execute("CREATE DATABASE uidf_bench_core")
        netloc = urlsplit(MYSQL_URL).netloc
        url = f"mysql+pymysql://{netloc}/uidf_bench_core"
        section, times = _run_core(
            url, rows, rounds, f"SQLAlchemy Core insert of {rows:,} rows, MariaDB", "sqla_mysql"
        )
    finally:
        with admin.cursor() as cursor:
            cursor.execute("DROP DATABASE IF EXISTS uidf_bench_core")
        admin.close()
    return [section], {"sqla_mysql": times}


# -- PostgreSQL index size ----------------------------------------------------------------
def run_index_size(rows: int = 1_000_000) -> tuple[list[Section], dict[str, Any]]:
    """Primary key B-tree size after ``rows`` rows of each key kind, as inserted in order."""
    generators = _generators()
    sizes: dict[str, int] = {}
    with pg_databases("uidf_bench_index") as (url,):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for kind in KEYS:
                table = f"idx_{kind}"
                if kind == "identity":
                    conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, n integer)")
                    conn.execute(
                        f"INSERT INTO {table} (n) SELECT g FROM generate_series(1, {rows}) g"
                    )
                elif kind == "uuid4":
                    conn.execute(f"CREATE TABLE {table} (id uuid PRIMARY KEY, n integer)")
                    conn.execute(
                        f"INSERT INTO {table} (id, n) SELECT gen_random_uuid(), g "
                        f"FROM generate_series(1, {rows}) g"
                    )
                else:
                    column = "bigint" if kind == "snowflake" else "uuid"
                    conn.execute(f"CREATE TABLE {table} (id {column} PRIMARY KEY, n integer)")
                    ids = generators[kind].next_ids(rows)
                    text = "".join(f"{value}\t{i}\n" for i, value in enumerate(ids))
                    with conn.cursor().copy(f"COPY {table} (id, n) FROM STDIN") as copy:
                        data = io.StringIO(text)
                        while chunk := data.read(1 << 20):
                            copy.write(chunk)
                sizes[kind] = conn.execute(f"SELECT pg_relation_size('{table}_pkey')").fetchone()[0]  # type: ignore[index]
    base = sizes["identity"]
    section = Section(
        "index_size",
        f"PostgreSQL primary key index after {rows:,} rows",
        ["primary key", "index MiB", "vs bigserial"],
        [[LABELS[k], f"{sizes[k] / 2**20:.1f}", f"{sizes[k] / base:.2f}x"] for k in KEYS],
        [
            "Rows inserted in the order each scheme makes them: bigserial and uuid4 "
            "server-side (generate_series, gen_random_uuid()), the others from uid_fields "
            "generators via COPY. Size is pg_relation_size of the primary key index."
        ],
    )
    return [section], {"index_size": sizes}


# -- database-side next_id ----------------------------------------------------------------
# Instagram's next_id() as the "Sharding & IDs at Instagram" post publishes it (its
# shard 5, a sequence of its own), the peer the database-side target is measured against.
INSTAGRAM_ORIGINAL = """
CREATE SEQUENCE IF NOT EXISTS instagram_seq;
CREATE OR REPLACE FUNCTION instagram_next_id(OUT result bigint) AS $$
DECLARE
    our_epoch bigint := {epoch};
    seq_id bigint;
    now_millis bigint;
    shard_id int := 5;
BEGIN
    SELECT nextval('instagram_seq') % 1024 INTO seq_id;
    SELECT FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) INTO now_millis;
    result := (now_millis - our_epoch) << 23;
    result := result | (shard_id << 10);
    result := result | (seq_id);
END;
$$ LANGUAGE PLPGSQL;
"""


def _pgbench(url: str, expr: str, clients: int, seconds: int) -> float:
    """Calls of ``SELECT expr`` per second with ``clients`` pgbench sessions."""
    parts = urlsplit(url)
    with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write(f"SELECT {expr};\n")
        script.flush()
        done = subprocess.run(
            [
                "pgbench", "-n", "-T", str(seconds), "-c", str(clients), "-j", str(clients),
                "-f", script.name, "-h", parts.hostname or "127.0.0.1",
                "-p", str(parts.port or 5432), "-U", parts.username or "postgres",
                parts.path.lstrip("/"),
            ],
            capture_output=True, text=True, check=True, timeout=seconds + 60,
        )  # fmt: skip
    found = re.search(r"tps = ([0-9.]+)", done.stdout)
    if found is None:
        raise RuntimeError(f"pgbench printed no tps: {done.stdout[-300:]}")
    return float(found.group(1))


PGBENCH = {
    "uid_next_id()": "uid_next_id()",
    "uid_c_next_id()": "uid_c_next_id()",
    "instagram": "instagram_next_id()",
    "nextval()": "nextval('plain_seq')",
}


@contextmanager
def _next_id_database() -> Iterator[tuple[str, bool]]:
    """A database for the next_id rows, and whether the C function can be installed there.

    A throwaway cluster of this machine's PostgreSQL that preloads the C function when
    it builds (``fsync=on``, as on the shared server: the commit flushes are part of what
    is measured); otherwise the shared server, without the C rows.
    """
    from tests.postgres_servers import build_c_library, create_extension, postgres_cluster

    settings = build_c_library()
    if settings is None:
        with pg_databases("uidf_bench_nextid") as (url,):
            yield url, False
        return
    with postgres_cluster(*settings, "fsync=on") as cluster:
        url = cluster.create_database("uidf_bench_nextid")
        create_extension(url)
        yield url, True


def _per_row(label: str, calls: int, time_s: float, base: float, base_name: str) -> list[str]:
    return [label, f"{calls / time_s / 1e3:.0f}", f"{time_s / base:.1f}x {base_name}"]


def run_pg_functions(
    calls: int = 100_000, rounds: int = 3, pgbench_seconds: int = 3
) -> tuple[list[Section], dict[str, Any]]:
    layout = INSTAGRAM.replace(epoch_ms=EPOCH_2024)
    functions = {
        "uid_next_id()": NextIdFunction(layout, shard=1),
        "uid_c_next_id()": NextIdFunction(layout, shard=1, name="uid_c_next_id", language="c"),
    }
    with _next_id_database() as (url, with_c):
        import psycopg

        if not with_c:
            del functions["uid_c_next_id()"]
        with psycopg.connect(url, autocommit=True) as conn:
            for function in functions.values():
                for statement in function.create_statements():
                    conn.execute(statement)
            conn.execute("CREATE SEQUENCE plain_seq")
            conn.execute(INSTAGRAM_ORIGINAL.format(epoch=layout.epoch_ms))
            defaults = {name: f.call for name, f in functions.items()}
            defaults["instagram"] = "instagram_next_id()"
            for name, default in defaults.items():
                conn.execute(
                    f"CREATE TABLE {_table(name)} (id bigint PRIMARY KEY DEFAULT {default}, n int)"
                )
            conn.execute(
                "CREATE TABLE with_identity (id bigint GENERATED BY DEFAULT AS IDENTITY "
                "PRIMARY KEY, n int)"
            )

            def select(expr: str) -> Callable[[], float]:
                sql = f"SELECT max({expr}) FROM generate_series(1, {calls})"
                return lambda: timed(lambda: conn.execute(sql).fetchone())

            def insert(table: str) -> Callable[[], float]:
                def go() -> float:
                    conn.execute(f"TRUNCATE {table}")
                    sql = f"INSERT INTO {table} (n) SELECT g FROM generate_series(1, {calls}) g"
                    return timed(lambda: conn.execute(sql))

                return go

            samples = alternate(
                [(f"select {name}", select(PGBENCH[name])) for name in defaults]
                + [("select nextval()", select("nextval('plain_seq')"))]
                + [(f"insert, default {name}", insert(_table(name))) for name in defaults]
                + [("insert, identity", insert("with_identity"))],
                rounds,
            )
        rates: dict[str, float] = {}
        if pgbench_seconds and shutil.which("pgbench"):
            # Alternate rounds, the median of each: one client's rate moves by 10% from
            # run to run on this machine.
            runs = alternate(
                [
                    (
                        f"{name}, {clients} clients",
                        _bind(_pgbench, url, PGBENCH[name], clients, pgbench_seconds),
                    )
                    for clients in (1, 8)
                    for name in (*defaults, "nextval()")
                ],
                rounds,
            )
            rates = {key: median(values) for key, values in runs.items()}
    times = {name: median(values) for name, values in samples.items()}
    labels = {
        "uid_next_id()": "next_id() (PL/pgSQL, the default)",
        "uid_c_next_id()": "next_id() in C (opt-in)",
        "instagram": "Instagram's original next_id()",
    }
    nextval, identity = times["select nextval()"], times["insert, identity"]
    rows = [
        _per_row(f"SELECT {labels[n]} per row", calls, times[f"select {n}"], nextval, "nextval()")
        for n in defaults
    ]
    rows.append(_per_row("SELECT nextval() per row", calls, nextval, nextval, "nextval()"))
    rows += [
        _per_row(
            f"INSERT ... DEFAULT {labels[n]}",
            calls,
            times[f"insert, default {n}"],
            identity,
            "identity",
        )
        for n in defaults
    ]
    rows.append(_per_row("INSERT ... identity", calls, identity, identity, "identity"))
    for clients in (1, 8) if rates else ():
        floor = rates[f"nextval(), {clients} clients"]
        for name in defaults:
            rate = rates[f"{name}, {clients} clients"]
            rows.append(
                [
                    f"pgbench SELECT {labels[name]}, {clients} client{'s' * (clients > 1)}",
                    f"{rate / 1e3:.1f}",
                    f"{rate / floor:.2f}x nextval()'s calls/s",
                ]
            )
    server = "a throwaway cluster that preloads the C function" if with_c else "the server"
    section = Section(
        "pg_next_id",
        f"PostgreSQL database-side ids ({calls:,} per statement)",
        ["statement", "k ids/s", "time vs plain"],
        rows,
        [
            f"On {server}. next_id() is the PL/pgSQL function of uid_fields.sql.postgres "
            "(a nextval of an unlogged sequence inside the current millisecond's block; "
            "the advisory lock once per millisecond, a WAL-logged state about twice a "
            "second); next_id() in C is postgres/uid_fields.c (the last id in shared "
            "memory, taken by compare-and-swap; a ceiling flushed to the WAL every half "
            "second); Instagram's original, installed beside them from the post's text, "
            "takes nextval() % 1024 and repeats ids above 1024 per ms; a plain sequence "
            "is the floor."
        ],
    )
    return [section], {"pg_next_id": times, "pg_next_id_clients": rates}


def _table(function: str) -> str:
    return "with_" + function.removesuffix("()").replace("uid_", "")


def run_sqla_flush(rows: int = 20_000, rounds: int = 3) -> tuple[list[Section], dict[str, Any]]:
    """A session flushing ``rows`` new objects over 4 PostgreSQL shards: ids made in
    Python against ids made by each shard's ``next_id()`` (fetched before the INSERTs)."""
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, mapped_column

    from uid_fields import ShardedIdGenerator, ShardMap
    from uid_fields.placement.shards import ByField
    from uid_fields.sqlalchemy import DatabaseIds, ShardedBigIntField, sharded_session

    layout = INSTAGRAM.replace(epoch_ms=EPOCH_2024)
    names = [f"uidf_bench_flush_{i}" for i in range(4)]
    with pg_databases(*names) as urls:
        engines = {
            f"shard_{i}": sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
            for i, url in enumerate(urls)
        }
        shard_map = ShardMap(list(engines), route=ByField(layout, "shard"))
        ids = DatabaseIds(layout, name="uid_bench_next_id")

        class Base(DeclarativeBase):
            pass

        class InPython(Base):
            __tablename__ = "flush_python"
            id = ShardedBigIntField(
                generator=ShardedIdGenerator(layout), shard_key="owner_id", primary_key=True
            )
            owner_id = mapped_column(sa.BigInteger)
            body = mapped_column(sa.String(20))

        class InDatabase(Base):
            __tablename__ = "flush_database"
            id = ShardedBigIntField(database_ids=ids, shard_key="owner_id", primary_key=True)
            owner_id = mapped_column(sa.BigInteger)
            body = mapped_column(sa.String(20))

        ids.attach(Base.metadata, DatabaseIds.shards_of(shard_map, engines))
        for engine in engines.values():
            Base.metadata.create_all(engine)

        def flush(model: Any) -> Callable[[], float]:
            def go() -> float:
                for engine in engines.values():
                    with engine.begin() as connection:
                        connection.execute(sa.text(f"TRUNCATE {model.__tablename__}"))

                def work() -> None:
                    with sharded_session(engines, shard_map=shard_map) as session:
                        session.add_all([model(owner_id=i, body="x") for i in range(rows)])
                        session.commit()

                return timed(work)

            return go

        fetches: dict[str, int] = dict.fromkeys(engines, 0)

        def count(name: str) -> Callable[..., None]:
            def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
                if "generate_series" in statement:
                    fetches[name] += 1

            return before

        try:
            samples = alternate(
                [("python", flush(InPython)), ("database", flush(InDatabase))], rounds
            )
            listeners = [(e, count(n)) for n, e in engines.items()]
            for engine, fn in listeners:
                sa.event.listen(engine, "before_cursor_execute", fn)
            flush(InDatabase)()
            for engine, fn in listeners:
                sa.event.remove(engine, "before_cursor_execute", fn)
        finally:
            for engine in engines.values():
                engine.dispose()
    times = {name: median(values) for name, values in samples.items()}
    per_shard = max(fetches.values())
    rows_out = [
        ["ids made in Python", f"{times['python']:.3f}", "1.00x", "-"],
        [
            "ids made by next_id() on each shard",
            f"{times['database']:.3f}",
            f"{times['database'] / times['python']:.2f}x",
            str(per_shard),
        ],
    ]
    section = Section(
        "sqla_flush",
        f"SQLAlchemy flush of {rows:,} new rows over 4 PostgreSQL shards",
        ["ids", "s", "vs Python ids", "id statements per shard"],
        rows_out,
        [
            "One session, add_all() then commit(). Database-side ids are fetched before "
            "the INSERTs, one SELECT ... generate_series per shard and table, so the rows "
            "still go in one executemany per shard."
        ],
    )
    return [section], {"sqla_flush": {**times, "fetches_per_shard": per_shard}}


def sequential(action: Callable[..., Any]) -> Callable[..., Any]:
    """``action`` with every fan-out inside it run one shard after another."""

    def go(*args: Any) -> Any:
        parallel.set_workers(0)
        try:
            return action(*args)
        finally:
            parallel.set_workers(parallel.DEFAULT_WORKERS)

    return go


# -- SQLAlchemy routed get against fan-out -------------------------------------------------
def run_sqla_routing(rows: int = 4000, gets: int = 300) -> tuple[list[Section], dict[str, Any]]:
    """``session.get`` (one shard) against ``session.on_all_shards(select(...))`` over
    8 PostgreSQL shards, in parallel and one shard after another, with and without a
    2 ms wait per query standing for a network round trip."""
    import random

    import sqlalchemy as sa
    from sqlalchemy.ext.horizontal_shard import ShardedSession
    from sqlalchemy.orm import DeclarativeBase, Session, mapped_column

    from uid_fields.sqlalchemy import SnowflakeField, sharded_session

    names = [f"uidf_bench_sa_shard_{i}" for i in range(SHARDS)]
    with pg_databases(*names) as urls:
        engines = {
            f"shard_{i}": sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
            for i, url in enumerate(urls)
        }

        class Base(DeclarativeBase):
            pass

        class Row(Base):
            __tablename__ = "routed_rows"
            id = SnowflakeField(
                generator=SnowflakeGenerator(LAYOUT, datacenter=1, worker=1), primary_key=True
            )
            n = mapped_column(sa.Integer)
            note = mapped_column(sa.String(30), index=True)

        for engine in engines.values():
            Base.metadata.create_all(engine)
        try:
            with sharded_session(engines) as session:
                objs = [Row(n=i, note=f"row {i}") for i in range(rows)]
                session.add_all(objs)
                session.commit()
                sample = random.Random(8).sample([(o.id, o.note) for o in objs], gets)
            session = sharded_session(engines)

            def run(action: Callable[[Any, Any], Any], picks: Any = sample) -> float:
                latencies = []
                for pk, note in picks:
                    start = time.perf_counter()
                    action(pk, note)
                    latencies.append(time.perf_counter() - start)
                    session.expunge_all()
                    session.commit()  # each get its own transaction, as a request would
                return median(latencies)

            def routed(pk: Any, note: Any) -> Any:
                return session.get(Row, pk)

            def fan_out(pk: Any, note: Any) -> Any:
                statement = sa.select(Row.id, Row.n, Row.note).where(Row.note == note)
                return session.on_all_shards(statement).all()

            def delayed(pk: Any, note: Any) -> Any:
                wait = sa.text("(SELECT true FROM pg_sleep(0.002))")
                statement = sa.select(Row.id, Row.n, Row.note).where(Row.note == note, wait)
                return session.on_all_shards(statement).all()

            few = sample[:60]
            run(routed)  # warm every connection, the pool's too
            run(fan_out)

            # SQLAlchemy's own horizontal sharding session, the peer: same engines, the
            # simplest choosers.
            plain_sharding: dict[str, Any] = {
                "shards": engines,
                "shard_chooser": lambda *args, **kwargs: "shard_0",
                "identity_chooser": lambda *args, **kwargs: ["shard_0"],
                "execute_chooser": lambda *args, **kwargs: ["shard_0"],
            }

            def construct(make: Callable[[], Any]) -> Callable[[], float]:
                # A session per request: what building one costs, closed unused.
                def measure() -> float:
                    times = []
                    for _ in range(gets):
                        start = time.perf_counter()
                        made = make()
                        times.append(time.perf_counter() - start)
                        made.close()
                    return median(times)

                return measure

            samples = alternate(
                [
                    ("routed", lambda: run(routed)),
                    ("fan-out", lambda: run(fan_out)),
                    ("fan-out, sequential", lambda: run(sequential(fan_out))),
                    ("delayed", lambda: run(delayed, few)),
                    ("delayed, sequential", lambda: run(sequential(delayed), few)),
                    ("new sharded_session()", construct(lambda: sharded_session(engines))),
                    ("new Session()", construct(lambda: Session(engines["shard_0"]))),
                    ("new ShardedSession()", construct(lambda: ShardedSession(**plain_sharding))),
                ],
                3,
            )
            session.close()
        finally:
            parallel.shutdown()
            for engine in engines.values():
                engine.dispose()
    latency = {name: median(values) for name, values in samples.items()}
    labels = [
        ("routed", "session.get(Row, id): routed by the id"),
        ("fan-out", "session.on_all_shards(select(...)): fan-out, in parallel"),
        ("fan-out, sequential", "the same, one shard after another"),
        ("delayed", "fan-out with 2 ms per query, in parallel"),
        ("delayed, sequential", "fan-out with 2 ms per query, one shard after another"),
        ("new sharded_session()", "building sharded_session(engines) (8 shards), closed unused"),
        ("new Session()", "building a plain Session(engine), closed unused"),
        ("new ShardedSession()", "building SQLAlchemy's ShardedSession(shards=engines, ...)"),
    ]
    section = Section(
        "sqla_routing",
        f"SQLAlchemy get() against fan-out over {SHARDS} PostgreSQL shards ({gets} gets)",
        ["query", "median latency ms", "vs routed"],
        [
            [label, f"{latency[key] * 1e3:.2f}", f"{latency[key] / latency['routed']:.2f}x"]
            for key, label in labels
        ],
    )
    return [section], {"sqla_routing": latency}


# -- Django -------------------------------------------------------------------------------
def _configure_django(
    default_url: str, shard_urls: list[str], mariadb: dict[str, Any] | None = None
) -> None:
    import django
    from django.conf import settings

    def db(url: str) -> dict[str, Any]:
        parts = urlsplit(url)
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": parts.path.lstrip("/"),
            "USER": parts.username or "postgres",
            "PASSWORD": parts.password or "",
            "HOST": parts.hostname or "127.0.0.1",
            "PORT": str(parts.port or 5432),
        }

    databases = {"default": db(default_url)}
    databases.update({f"shard_{i}": db(url) for i, url in enumerate(shard_urls)})
    if mariadb is not None:
        databases["mariadb"] = mariadb
    settings.configure(
        DATABASES=databases,
        INSTALLED_APPS=["django.contrib.contenttypes", "uid_fields.django"],
        DATABASE_ROUTERS=["uid_fields.django.ShardRouter"],
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        UID_FIELDS={
            "GENERATORS": {
                "default": {
                    "kind": "snowflake",
                    "layout": "twitter",
                    "epoch": "2024-01-01T00:00:00Z",
                    "fields": {"datacenter": 1, "worker": 1},
                },
                "events": {"kind": "locality", "sequential": False},
                "events_seq": {"kind": "locality", "sequential": True},
                # Keyed writes (keyed_writes.py): one process writes, as in the benchmark.
                "photos_bench": {
                    "kind": "sharded",
                    "layout": "instagram",
                    "epoch": "2024-01-01T00:00:00Z",
                    "single_process": True,
                },
            },
            "SHARDS": {
                "bench8": {"databases": [f"shard_{i}" for i in range(len(shard_urls))]},
                "bench1": {"databases": ["default"]},
                "bench4": {"databases": [f"shard_{i}" for i in range(4)]},
            },
        },
    )
    django.setup()


def _django_models() -> dict[str, Any]:
    from django.db import models

    from uid_fields.django import LocalityUUIDField, ShardedManager, SnowflakeField

    def model(name: str, pk: Any | None, manager: Any | None = None) -> Any:
        attrs: dict[str, Any] = {
            "__module__": __name__,
            "n": models.IntegerField(),
            "note": models.CharField(max_length=40),
            "Meta": type("Meta", (), {"app_label": "uidf_bench", "db_table": f"dj_{name}"}),
        }
        if pk is not None:
            attrs["id"] = pk
        if manager is not None:
            attrs["objects"] = manager
        return type(f"Bench{name.title().replace('_', '')}", (models.Model,), attrs)

    return {
        "snowflake": model("snowflake", SnowflakeField(primary_key=True)),
        "identity": model("identity", None),
        "uuid4": model("uuid4", models.UUIDField(primary_key=True, default=uuid.uuid4)),
        "locality_variable": model(
            "locality_variable", LocalityUUIDField(primary_key=True, generator="events")
        ),
        "locality_sequential": model(
            "locality_sequential", LocalityUUIDField(primary_key=True, generator="events_seq")
        ),
        "sharded": model(
            "sharded", SnowflakeField(primary_key=True, shards="bench8"), ShardedManager()
        ),
    }


def run_django(
    rows: int = 100_000,
    rounds: int = 3,
    sharded_rows: int = 4000,
    gets: int = 300,
    keyed_rows: int = 1000,
    keyed_rounds: int = 15,
    keyed_calls: int = 3,
) -> tuple[list[Section], dict[str, Any]]:
    names = ["uidf_bench_django", *[f"uidf_bench_shard_{i}" for i in range(SHARDS)]]
    with pg_databases(*names) as urls, _mariadb_database("uidf_bench_django") as mariadb:
        _configure_django(urls[0], urls[1:], mariadb)
        from django.db import connections

        model_of = _django_models()
        keyed_of = keyed_writes.django_keyed_models()
        with connections["default"].schema_editor() as editor:
            for kind in KEYS:
                editor.create_model(model_of[kind])
            editor.create_model(keyed_of["plain"])
            editor.create_model(keyed_of["keyed"])
        for i in range(SHARDS):
            with connections[f"shard_{i}"].schema_editor() as editor:
                editor.create_model(model_of["sharded"])
                if i < 4:
                    editor.create_model(keyed_of["snowflake4"])
        if mariadb is not None:
            with connections["mariadb"].schema_editor() as editor:
                for kind in ("snowflake", "identity"):
                    editor.create_model(model_of[kind])
        sections: list[Section] = []
        data: dict[str, Any] = {}
        try:
            insert_section, data["django_pg"] = _django_inserts(model_of, rows, rounds)
            sections.append(insert_section)
            if mariadb is not None:
                my_section, data["django_mysql"] = _django_inserts(
                    model_of, rows, rounds, alias="mariadb", kinds=("snowflake", "identity")
                )
                sections.append(my_section)
            routed_section, data["routing"] = _django_routing(
                model_of["sharded"], sharded_rows, gets
            )
            sections.append(routed_section)
            keyed_section, data["django_keyed"] = keyed_writes.run_django_keyed(
                keyed_of, keyed_rows, keyed_rounds, keyed_calls
            )
            sections.append(keyed_section)
        finally:
            for alias in connections:
                connections[alias].close()
    return sections, data


@contextmanager
def _mariadb_database(name: str) -> Iterator[dict[str, Any] | None]:
    """A fresh MariaDB database as Django settings; None when the server is not there."""
    try:
        import pymysql

        params = _mysql_params()
        admin = pymysql.connect(**params, autocommit=True, connect_timeout=5)
    except Exception:  # no MariaDB: the PostgreSQL tables alone
        yield None
        return
    pymysql.install_as_MySQLdb()
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
            cursor.execute(f"CREATE DATABASE {name}")
        yield {
            "ENGINE": "django.db.backends.mysql",
            "NAME": name,
            "USER": params["user"],
            "PASSWORD": params["password"],
            "HOST": params["host"],
            "PORT": str(params["port"]),
            "OPTIONS": {"charset": "utf8mb4"},
        }
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def _django_inserts(
    model_of: dict[str, Any],
    rows: int,
    rounds: int,
    *,
    alias: str = "default",
    kinds: tuple[str, ...] = KEYS,
) -> tuple[Section, dict[str, float]]:
    from django.db import connections

    def measure(kind: str) -> Callable[[], float]:
        model = model_of[kind]

        def go() -> float:
            with connections[alias].cursor() as cursor:
                cursor.execute(f"TRUNCATE {model._meta.db_table}")

            def insert() -> None:
                objs = [model(n=i, note="benchmark row") for i in range(rows)]
                model.objects.using(alias).bulk_create(objs, batch_size=10_000)

            return timed(insert)

        return go

    samples = alternate([(kind, measure(kind)) for kind in kinds], rounds)
    times = {kind: median(samples[kind]) for kind in kinds}
    server = "MariaDB" if alias == "mariadb" else "PostgreSQL"
    section = Section(
        "django_mysql" if alias == "mariadb" else "django_pg",
        f"Django bulk_create of {rows:,} rows (batches of 10,000), {server}",
        ["primary key", f"{rows // 1000}k rows, s", "vs BigAutoField"],
        _ratio_rows(times, "identity"),
        [
            "Timed from building the model instances (where uid_fields fills the ids) to "
            "the last batch; BigAutoField gets its ids back through RETURNING."
        ],
    )
    return section, times


def _django_routing(model: Any, rows: int, gets: int) -> tuple[Section, dict[str, Any]]:
    import random

    from django.db.backends.signals import connection_created

    objs = [model(n=i, note=f"row {i}") for i in range(rows)]
    model.objects.bulk_create(objs, batch_size=1000)
    sample = random.Random(8).sample(objs, gets)
    # Queries counted on every connection, the fan-out pool's threads' included.
    counted = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        counted[0] += 1
        return execute(sql, params, many, context)

    def instrument(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(count)

    from django.db import connections

    for alias in connections:
        connections[alias].close()
    parallel.shutdown()
    connection_created.connect(instrument)

    def run(action: Callable[[Any], Any], objs: Any = sample) -> tuple[float, float]:
        latencies = []
        before = counted[0]
        for obj in objs:
            start = time.perf_counter()
            action(obj)
            latencies.append(time.perf_counter() - start)
        return median(latencies), (counted[0] - before) / len(objs)

    def routed(obj: Any) -> Any:
        return model.objects.get(pk=obj.pk)

    def fan_out(obj: Any) -> Any:
        return model.objects.on_all_shards().get(note=obj.note)

    # A 2 ms wait per query stands for a network round trip (an uncorrelated condition:
    # the server evaluates it once, before the scan).
    def delayed(obj: Any) -> Any:
        slow = model.objects.on_all_shards().extra(where=["(SELECT true FROM pg_sleep(0.002))"])
        return slow.get(note=obj.note)

    few = sample[:60]
    run(routed)  # warm every connection, the pool's too
    run(fan_out)
    samples = alternate(
        [
            ("routed", lambda: run(routed)[0]),
            ("fan-out", lambda: run(fan_out)[0]),
            ("fan-out, sequential", lambda: run(sequential(fan_out))[0]),
            ("delayed", lambda: run(delayed, few)[0]),
            ("delayed, sequential", lambda: run(sequential(delayed), few)[0]),
        ],
        3,
    )
    routed_queries = run(routed)[1]
    fan_queries = run(fan_out)[1]
    connection_created.disconnect(instrument)
    latency = {name: median(values) for name, values in samples.items()}
    section = Section(
        "routing",
        f"Django get() over {SHARDS} PostgreSQL shards ({rows:,} rows, {gets} gets)",
        ["query", "queries per get", "median latency ms", "vs routed"],
        [
            [
                "objects.get(pk=id): routed by the id",
                f"{routed_queries:.1f}",
                f"{latency['routed'] * 1e3:.2f}",
                "1.00x",
            ],
            [
                "objects.on_all_shards().get(note=...): fan-out, in parallel",
                f"{fan_queries:.1f}",
                f"{latency['fan-out'] * 1e3:.2f}",
                f"{latency['fan-out'] / latency['routed']:.2f}x",
            ],
            [
                "the same, one shard after another",
                f"{fan_queries:.1f}",
                f"{latency['fan-out, sequential'] * 1e3:.2f}",
                f"{latency['fan-out, sequential'] / latency['routed']:.2f}x",
            ],
            [
                "fan-out with 2 ms per query, in parallel",
                f"{fan_queries:.1f}",
                f"{latency['delayed'] * 1e3:.2f}",
                f"{latency['delayed'] / latency['routed']:.2f}x",
            ],
            [
                "fan-out with 2 ms per query, one shard after another",
                f"{fan_queries:.1f}",
                f"{latency['delayed, sequential'] * 1e3:.2f}",
                f"{latency['delayed, sequential'] / latency['routed']:.2f}x",
            ],
        ],
    )
    return section, {
        "latency": latency,
        "queries": {"routed": routed_queries, "fan-out": fan_queries},
    }
