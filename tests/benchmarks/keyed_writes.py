"""Keyed bulk writes per call, against the same writes of plain models on one database.

The design's per-call targets for writes: ``bulk_create`` of 1000 rows of a model with
``ShardedBigIntField(shard_key=...)`` at most 1.25x the same rows of a ``BigAutoField``
model (both on one PostgreSQL database), ``bulk_create`` of 1000 Snowflake rows spread
over 4 shards at most 1.15x the plain rows on one database, and a SQLAlchemy flush of
1000 keyed objects at most 1.25x the same objects with an identity key. Each call builds
its 1000 objects inside the timed part (the keyed ids are made when an object is built,
from its key: that is part of what a keyed model costs) with 1000 distinct keys, the
case where no two rows share a logical shard. Candidates alternate within each round
(``harness.alternate``) and the median of the rounds is reported, so load on the machine
hits them alike; each round times ``calls`` calls of each and takes their median. The
tables are emptied before each candidate's calls, outside the timing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .harness import Section, alternate, median

__all__ = ["django_keyed_models", "run_django_keyed", "run_sqla_keyed_flush"]

#: The three candidates of the Django table, in order: (key, label).
DJANGO_ROWS = (
    ("plain", "BigAutoField, one database"),
    ("keyed", "ShardedBigIntField(shard_key=...), one database"),
    ("snowflake4", "SnowflakeField, 4 shards"),
)


def _per_call(
    work: Callable[[], None], reset: Callable[[], None], calls: int
) -> Callable[[], float]:
    """Seconds per call of ``work`` (the median of ``calls``), ``reset`` before each."""

    def measure() -> float:
        samples = []
        for _ in range(calls):
            reset()
            started = time.perf_counter()
            work()
            samples.append(time.perf_counter() - started)
        return float(statistics.median(samples))

    return measure


def django_keyed_models() -> dict[str, Any]:
    """The benchmark's models (Django must be set up with the ``bench1``/``bench4``
    shard maps and the ``photos_bench`` generator: see ``databases._configure_django``)."""
    from django.db import models

    from uid_fields.django import ShardedBigIntField, ShardedManager, SnowflakeField

    def model(name: str, pk: Any | None, manager: Any | None) -> Any:
        attrs: dict[str, Any] = {
            "__module__": __name__,
            "owner_id": models.BigIntegerField(),
            "note": models.CharField(max_length=40),
            "Meta": type("Meta", (), {"app_label": "uidf_bench", "db_table": f"kw_{name}"}),
        }
        if pk is not None:
            attrs["id"] = pk
        if manager is not None:
            attrs["objects"] = manager
        return type(f"KeyedWrites{name.title()}", (models.Model,), attrs)

    return {
        "plain": model("plain", None, None),
        "keyed": model(
            "keyed",
            ShardedBigIntField(
                primary_key=True, generator="photos_bench", shards="bench1", shard_key="owner_id"
            ),
            ShardedManager(),
        ),
        "snowflake4": model(
            "snowflake4", SnowflakeField(primary_key=True, shards="bench4"), ShardedManager()
        ),
    }


def run_django_keyed(
    model_of: dict[str, Any], rows: int = 1000, rounds: int = 15, calls: int = 3
) -> tuple[Section, dict[str, Any]]:
    """``bulk_create`` of ``rows`` new objects per call, each model against plain."""
    from django.db import connections

    def tables(kind: str) -> list[tuple[str, str]]:
        if kind == "snowflake4":
            return [(f"shard_{i}", "kw_snowflake4") for i in range(4)]
        return [("default", f"kw_{kind}")]

    def reset(kind: str) -> Callable[[], None]:
        def empty() -> None:
            for alias, table in tables(kind):
                with connections[alias].cursor() as cursor:
                    cursor.execute(f"TRUNCATE {table}")

        return empty

    def work(kind: str) -> Callable[[], None]:
        model = model_of[kind]

        def insert() -> None:
            model.objects.bulk_create([model(owner_id=i, note="x") for i in range(rows)])

        return insert

    for kind, _ in DJANGO_ROWS:  # warm up: connections, generators, the settings
        reset(kind)()
        work(kind)()
    samples = alternate(
        [(kind, _per_call(work(kind), reset(kind), calls)) for kind, _ in DJANGO_ROWS], rounds
    )
    times = {kind: median(values) for kind, values in samples.items()}
    base = times["plain"]
    table = [
        [
            label,
            f"{times[kind] * 1e3:.2f}",
            f"{times[kind] / rows * 1e6:.1f}",
            f"{times[kind] / base:.2f}x",
        ]
        for kind, label in DJANGO_ROWS
    ]
    section = Section(
        "django_keyed",
        f"Django bulk_create of {rows:,} new objects per call (built in the call), PostgreSQL",
        ["model", "ms per call", "us per row", "vs plain"],
        table,
        [
            f"{rows:,} distinct shard keys per call; the keyed model's shard map names one "
            "database (the plain model's), the Snowflake model's four databases of the same "
            "server; median of the rounds, candidates alternating."
        ],
    )
    return section, {**times, "rows": rows}


def run_sqla_keyed_flush(
    rows: int = 1000, rounds: int = 15, calls: int = 3
) -> tuple[list[Section], dict[str, Any]]:
    """A session flushing ``rows`` new keyed objects against plain objects, one database."""
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, Session, mapped_column

    from uid_fields import INSTAGRAM, ShardedIdGenerator, ShardMap
    from uid_fields.placement.shards import ByField
    from uid_fields.sqlalchemy import ShardedBigIntField, sharded_session

    from .databases import EPOCH_2024, pg_databases

    layout = INSTAGRAM.replace(epoch_ms=EPOCH_2024)
    with pg_databases("uidf_bench_keyed_flush") as urls:
        engine = sa.create_engine(urls[0].replace("postgresql://", "postgresql+psycopg://"))

        class Base(DeclarativeBase):
            pass

        class Plain(Base):
            __tablename__ = "flush_plain"
            id = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
            owner_id = mapped_column(sa.BigInteger)
            body = mapped_column(sa.String(20))

        class AppIds(Base):
            """Plain, with ids the application makes: SQLAlchemy's executemany path."""

            __tablename__ = "flush_app_ids"
            id = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
            owner_id = mapped_column(sa.BigInteger)
            body = mapped_column(sa.String(20))

        class Keyed(Base):
            __tablename__ = "flush_keyed"
            id = ShardedBigIntField(
                generator=ShardedIdGenerator(layout), shard_key="owner_id", primary_key=True
            )
            owner_id = mapped_column(sa.BigInteger)
            body = mapped_column(sa.String(20))

        Base.metadata.create_all(engine)
        shard_map = ShardMap(["one"], route=ByField(layout, "shard"))

        def reset(model: Any) -> Callable[[], None]:
            def empty() -> None:
                with engine.begin() as connection:
                    connection.execute(sa.text(f"TRUNCATE {model.__tablename__}"))

            return empty

        def plain() -> None:
            with Session(engine) as session:
                session.add_all([Plain(owner_id=i, body="x") for i in range(rows)])
                session.commit()

        next_app_id = iter(range(1, 1 << 62)).__next__

        def app_ids() -> None:
            with Session(engine) as session:
                session.add_all(
                    [AppIds(id=next_app_id(), owner_id=i, body="x") for i in range(rows)]
                )
                session.commit()

        def keyed() -> None:
            with sharded_session({"one": engine}, shard_map=shard_map) as session:
                session.add_all([Keyed(owner_id=i, body="x") for i in range(rows)])
                session.commit()

        try:
            for work, model in ((plain, Plain), (app_ids, AppIds), (keyed, Keyed)):
                reset(model)()
                work()
            samples = alternate(
                [
                    ("plain", _per_call(plain, reset(Plain), calls)),
                    ("app_ids", _per_call(app_ids, reset(AppIds), calls)),
                    ("keyed", _per_call(keyed, reset(Keyed), calls)),
                ],
                rounds,
            )
        finally:
            engine.dispose()
    times = {name: median(values) for name, values in samples.items()}
    table = [
        [
            label,
            f"{times[name] * 1e3:.2f}",
            f"{times[name] / rows * 1e6:.1f}",
            f"{times[name] / times['plain']:.2f}x",
        ]
        for name, label in (
            ("plain", "identity key, Session"),
            ("app_ids", "bigint key the application sets, Session"),
            ("keyed", "ShardedBigIntField(shard_key=...), sharded_session"),
        )
    ]
    section = Section(
        "sqla_keyed_flush",
        f"SQLAlchemy flush of {rows:,} new objects per call (built in the call), PostgreSQL",
        ["model", "ms per call", "us per row", "vs plain"],
        table,
        [
            f"add_all() then commit(); {rows:,} distinct shard keys; the sharded session's "
            "one shard is the plain session's database. With the ids known before the "
            "INSERT, SQLAlchemy sends the rows as one executemany (psycopg pipelines one "
            "INSERT per row); an identity key makes it send multi-row INSERT ... RETURNING "
            "instead: the middle row is the same executemany path without uid_fields."
        ],
    )
    return [section], {"sqla_keyed_flush": {**times, "rows": rows}}
