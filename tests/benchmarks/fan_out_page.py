"""A fan-out's first page against one database: ``order_by('-id')[:20]`` over 8
PostgreSQL shards and the same query on one database holding every row, for Django and
SQLAlchemy, without and with a 1 ms wait per query (``pg_sleep(0.001)`` in the WHERE
clause of both, which the server evaluates once per query, before the scan).

The reference row sends the same SQL to the 8 shards at once from asyncio psycopg and
merges with ``heapq``: what a fan-out costs with no ORM at all.

Django is configured once per process, so the measurements run in a child process
(``python -m tests.benchmarks.fan_out_page``) that prints them as JSON.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from uid_fields.ops import parallel

from .databases import LAYOUT, SHARDS, pg_databases, sequential
from .harness import Section, alternate, median

__all__ = ["run"]

PAGE = 20
WAIT = "(SELECT true FROM pg_sleep(0.001))"
CASES = ("one database", "fan-out", "fan-out, sequential", "fan-out in a transaction")


def run(
    rows: int = 20_000, calls: int = 200, rounds: int = 3
) -> tuple[list[Section], dict[str, Any]]:
    child = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.fan_out_page", str(rows), str(calls), str(rounds)],
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"the fan-out page benchmark failed:\n{child.stderr[-4000:]}")
    data: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    sections = [_section(orm, data[orm], rows, calls) for orm in ("django", "sqlalchemy")]
    return sections, {"fan_out_page": data}


def _section(orm: str, times: dict[str, float], rows: int, calls: int) -> Section:
    label = {"django": "Django", "sqlalchemy": "SQLAlchemy"}[orm]
    query = {
        "django": "objects.on_all_shards().order_by('-id')[:20]",
        "sqlalchemy": "session.on_all_shards(select(Row).order_by(Row.id.desc()).limit(20))",
    }[orm]
    table = []
    for wait in ("", ", 1 ms wait"):
        one = times[f"one database{wait}"]
        for case in (*CASES, "asyncio psycopg + heapq"):
            key = f"{case}{wait}"
            if key in times:
                table.append(
                    [f"{case}{wait}", f"{times[key] * 1e3:.2f}", f"{times[key] / one:.2f}x"]
                )
    return Section(
        f"fan_out_page_{orm}",
        f"{label}: a page of {PAGE} newest rows over {SHARDS} PostgreSQL shards "
        f"({rows:,} rows, median of {calls} calls)",
        ["query", "median latency ms", "vs one database"],
        table,
        [
            f"{query}; one database is the same query on a database holding every row. "
            "The 1 ms wait is pg_sleep(0.001) in the WHERE clause of both, once per query. "
            "In a transaction: the fan-out alone, inside sharded_atomic() (Django) or "
            "after a routed read began the session's transaction (SQLAlchemy)."
        ],
    )


# -- the child process --------------------------------------------------------------------
def _configure_django(one: str, shards: list[str]) -> None:
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

    databases = {"default": db(one)}
    databases.update({f"shard_{i}": db(url) for i, url in enumerate(shards)})
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
                    "fields": {"datacenter": 1, "worker": 2},
                },
            },
            "SHARDS": {"page8": {"databases": [f"shard_{i}" for i in range(len(shards))]}},
        },
    )
    django.setup()


def _measure(
    candidates: list[tuple[str, Callable[[], object]]], calls: int, rounds: int
) -> dict[str, float]:
    def latency(action: Callable[[], object]) -> Callable[[], float]:
        def go() -> float:
            spent = []
            for _ in range(calls):
                start = time.perf_counter()
                timed = action()  # a float: the action timed its own part
                took = time.perf_counter() - start
                spent.append(timed if isinstance(timed, float) else took)
            return median(spent)

        return go

    for _, action in candidates:  # warm every connection, the pools' too
        for _ in range(20):
            action()
    samples = alternate([(name, latency(action)) for name, action in candidates], rounds)
    return {name: median(values) for name, values in samples.items()}


def _django(one: str, shards: list[str], rows: int, calls: int, rounds: int) -> dict[str, float]:
    _configure_django(one, shards)
    from django.db import connections, models

    from uid_fields.django import ShardedManager, SnowflakeField, sharded_atomic

    class Row(models.Model):
        id = SnowflakeField(primary_key=True, shards="page8")
        n = models.IntegerField()
        note = models.CharField(max_length=40)
        objects = ShardedManager()

        class Meta:
            app_label = "uidf_bench_page"
            db_table = "dj_page"

    for alias in connections:
        with connections[alias].schema_editor() as editor:
            editor.create_model(Row)
    made = Row.objects.bulk_create(
        [Row(n=i, note=f"row {i}") for i in range(rows)], batch_size=5000
    )
    with connections["default"].cursor() as cursor:
        cursor.executemany(
            "INSERT INTO dj_page (id, n, note) VALUES (%s, %s, %s)",
            [(r.pk, r.n, r.note) for r in made],
        )
    expected = [r.pk for r in sorted(made, key=lambda r: -r.pk)[:PAGE]]
    del made

    def one_page(wait: bool) -> Callable[[], object]:
        def go() -> object:
            qs = Row.objects.using("default").order_by("-id")
            return list((qs.extra(where=[WAIT]) if wait else qs)[:PAGE])

        return go

    def fan_out(wait: bool) -> Callable[[], object]:
        def go() -> object:
            qs = Row.objects.on_all_shards().order_by("-id")
            return list((qs.extra(where=[WAIT]) if wait else qs)[:PAGE])

        return go

    def in_transaction(wait: bool) -> Callable[[], object]:
        read = fan_out(wait)

        def go() -> float:  # the fan-out alone, inside sharded_atomic() (ATOMIC_REQUESTS)
            with sharded_atomic():
                start = time.perf_counter()
                read()
                return time.perf_counter() - start

        return go

    assert [r.pk for r in fan_out(True)()] == expected == [r.pk for r in one_page(True)()]
    times: dict[str, float] = {}
    for wait, suffix in ((False, ""), (True, ", 1 ms wait")):
        times.update(
            _measure(
                [
                    (f"one database{suffix}", one_page(wait)),
                    (f"fan-out{suffix}", fan_out(wait)),
                    (f"fan-out, sequential{suffix}", sequential(fan_out(wait))),
                    (f"fan-out in a transaction{suffix}", in_transaction(wait)),
                ],
                calls,
                rounds,
            )
        )
    for alias in connections:
        connections[alias].close()
    parallel.shutdown()
    return times


def _sqlalchemy(
    one: str, shards: list[str], rows: int, calls: int, rounds: int
) -> dict[str, float]:
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, Session, mapped_column

    from uid_fields import SnowflakeGenerator
    from uid_fields.sqlalchemy import SnowflakeField, bulk_insert, sharded_session

    def engine(url: str) -> Any:
        return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))

    engines = {f"shard_{i}": engine(url) for i, url in enumerate(shards)}
    reference = engine(one)

    class Base(DeclarativeBase):
        pass

    class Row(Base):
        __tablename__ = "sa_page"
        id = SnowflakeField(
            generator=SnowflakeGenerator(LAYOUT, datacenter=1, worker=3), primary_key=True
        )
        n = mapped_column(sa.Integer)
        note = mapped_column(sa.String(40))

    for e in [*engines.values(), reference]:
        Base.metadata.create_all(e)
    values = [{"n": i, "note": f"row {i}"} for i in range(rows)]
    with sharded_session(engines) as session:
        ids = bulk_insert(session, Row, values)
        session.commit()
    with reference.begin() as connection:
        connection.execute(
            sa.insert(Row), [{"id": i, **v} for i, v in zip(ids, values, strict=True)]
        )
    session = sharded_session(engines)
    plain = Session(reference)
    wait = sa.text(WAIT)

    def page(waiting: bool) -> Any:
        statement = sa.select(Row).order_by(Row.id.desc()).limit(PAGE)
        return statement.where(wait) if waiting else statement

    def one_page(waiting: bool) -> Callable[[], object]:
        def go() -> object:
            found = plain.execute(page(waiting)).scalars().all()
            plain.expunge_all()
            plain.commit()
            return found

        return go

    def fan_out(waiting: bool) -> Callable[[], object]:
        def go() -> object:
            found = session.on_all_shards(page(waiting)).scalars().all()
            session.expunge_all()
            session.commit()  # each page its own transaction, as a request would
            return found

        return go

    def in_transaction(waiting: bool) -> Callable[[], object]:
        def go() -> float:  # the fan-out alone, after a routed read began the transaction
            session.get(Row, ids[0])
            start = time.perf_counter()
            session.on_all_shards(page(waiting)).scalars().all()
            spent = time.perf_counter() - start
            session.expunge_all()
            session.commit()
            return spent

        return go

    expected = sorted(ids, reverse=True)[:PAGE]
    assert [r.id for r in fan_out(True)()] == expected  # type: ignore[attr-defined]
    times: dict[str, float] = {}
    for waiting, suffix in ((False, ""), (True, ", 1 ms wait")):
        sql = str(page(waiting).compile(reference, compile_kwargs={"literal_binds": True}))
        times.update(
            _measure(
                [
                    (f"one database{suffix}", one_page(waiting)),
                    (f"fan-out{suffix}", fan_out(waiting)),
                    (f"fan-out, sequential{suffix}", sequential(fan_out(waiting))),
                    (f"fan-out in a transaction{suffix}", in_transaction(waiting)),
                    (f"asyncio psycopg + heapq{suffix}", _asyncio_reference(shards, sql)),
                ],
                calls,
                rounds,
            )
        )
    session.close()
    plain.close()
    parallel.shutdown()
    for e in [*engines.values(), reference]:
        e.dispose()
    return times


def _asyncio_reference(shards: list[str], sql: str) -> Callable[[], object]:
    """The same SQL to every shard at once from asyncio psycopg, merged with heapq: one
    event loop and one open connection per shard, kept across calls."""
    import psycopg

    loop = asyncio.new_event_loop()

    async def connect() -> list[Any]:
        return [await psycopg.AsyncConnection.connect(url, autocommit=True) for url in shards]

    connections = loop.run_until_complete(connect())

    async def one(connection: Any) -> list[Any]:
        cursor = await connection.execute(sql)
        return list(await cursor.fetchall())

    async def page() -> list[Any]:
        parts = await asyncio.gather(*(one(c) for c in connections))
        merged = heapq.merge(*parts, key=lambda row: row[0], reverse=True)
        return [row for _, row in zip(range(PAGE), merged, strict=False)]

    return lambda: loop.run_until_complete(page())


def main(argv: list[str]) -> int:
    rows, calls, rounds = (int(a) for a in argv)
    names = ["uidf_bench_page_one", *[f"uidf_bench_page_{i}" for i in range(SHARDS)]]
    with pg_databases(*names) as urls:
        data = {
            "django": _django(urls[0], urls[1:], rows, calls, rounds),
            "sqlalchemy": _sqlalchemy(urls[0], urls[1:], rows, calls, rounds),
        }
    print(json.dumps(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
