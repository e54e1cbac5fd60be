"""``on_all_shards`` merges exactly as one database holding every row: NULLs, ties,
descending and several keys, ``nulls_first()``/``nulls_last()``, mixed-case and accented
text (MariaDB's case- and accent-insensitive default collation), entities and plain
columns, LIMIT/OFFSET; on SQLite, PostgreSQL and MariaDB shards.

The reference is a copy of the table on one shard of the same backend, holding every
row with the same ids: the same statement there is what one database answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import BigInteger, MetaData, String, Table, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from uid_fields import ShardedIdGenerator
from uid_fields.errors import UnmergeableQueryError
from uid_fields.placement import allow_off_shard_writes
from uid_fields.sqlalchemy import ShardedBigIntField, bulk_insert, sharded_session

from .models import PHOTO_LAYOUT

pytestmark = pytest.mark.versions

RANKS = [None, 0, 3, 1, None, 2, 1, 0, 5]
NAMES = ["a", "B", "A", "b", "é", "e", "Z", "ab", "a b", "_x", "E"]


class MergeBase(DeclarativeBase):
    pass


class Ranked(MergeBase):
    __tablename__ = "ranked"
    id: Mapped[int] = ShardedBigIntField(
        generator=ShardedIdGenerator(PHOTO_LAYOUT), shard_key="bucket", primary_key=True
    )
    bucket: Mapped[int] = mapped_column(BigInteger)
    rank: Mapped[int | None] = mapped_column(nullable=True)
    name: Mapped[str] = mapped_column(String(20))


Order = Callable[[Any], list[Any]]  # columns (the entity or a table's .c) -> ORDER BY

CASES: dict[str, tuple[Order, int, int | None, bool]] = {
    # name: (order by, offset, limit, needs NULLS FIRST/LAST in SQL)
    "rank, two": (lambda c: [c.rank, c.id], 0, 2, False),
    "rank descending, a page": (lambda c: [c.rank.desc(), c.id], 3, 6, False),
    "nulls first": (lambda c: [c.rank.asc().nulls_first(), c.id], 0, 5, True),
    "nulls last, descending": (lambda c: [c.rank.desc().nulls_last(), c.id], 0, 5, True),
    "name": (lambda c: [c.name, c.id], 0, 7, False),
    "name descending then rank": (lambda c: [c.name.desc(), c.rank, c.id], 2, 8, False),
    "rank then name, all": (lambda c: [c.rank, c.name, c.id], 0, None, False),
}


@pytest.fixture
def tables(shards: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    for engine in shards.values():
        MergeBase.metadata.drop_all(engine)
        MergeBase.metadata.create_all(engine)
    yield shards
    for engine in shards.values():
        MergeBase.metadata.drop_all(engine)


def _statement(columns: Any, order: Order, offset: int, limit: int | None, entity: bool) -> Any:
    chosen = select(columns) if entity else select(columns.id, columns.rank, columns.name)
    statement = chosen.order_by(*order(columns)).offset(offset or None)
    return statement.limit(limit) if limit is not None else statement


def _ids(rows: list[Any]) -> list[int]:
    return [row[0].id if isinstance(row[0], Ranked) else row[0] for row in rows]


def test_every_merge_answers_as_one_database(tables: dict[str, Engine]) -> None:
    rows = [
        {"bucket": i % 11, "rank": RANKS[i % len(RANKS)], "name": NAMES[i % len(NAMES)]}
        for i in range(66)
    ]
    with sharded_session(tables) as session:
        ids = bulk_insert(session, Ranked, rows)
        session.commit()
        merged: dict[str, list[int]] = {}
        for name, (order, offset, limit, explicit) in CASES.items():
            if explicit and session.get_bind(shard_id="shard_0").dialect.name == "mysql":
                continue  # MariaDB has no NULLS FIRST/LAST syntax
            for entity in (True, False):
                statement = _statement(
                    Ranked if entity else Ranked.__table__.c, order, offset, limit, entity
                )
                merged[f"{name} ({'entity' if entity else 'columns'})"] = _ids(
                    list(session.on_all_shards(statement).all())
                )
    spread = {shard for shard, engine in tables.items() if _count(engine, Ranked.__table__)}
    assert len(spread) >= 3  # the rows really are spread
    reference = Ranked.__table__.to_metadata(MetaData(), name="ranked_all")
    one = tables["shard_0"]
    reference.create(one)
    try:
        with allow_off_shard_writes(), one.begin() as connection:
            connection.execute(
                reference.insert(), [{"id": i, **row} for i, row in zip(ids, rows, strict=True)]
            )
        expected: dict[str, list[int]] = {}
        with Session(one) as plain:
            for label in merged:
                name = label.rsplit(" (", 1)[0]
                order, offset, limit, _ = CASES[name]
                statement = _statement(reference.c, order, offset, limit, False)
                expected[label] = _ids(list(plain.execute(statement).all()))
    finally:
        reference.drop(one)
    for label in merged:
        assert merged[label] == expected[label], f"{label} on {one.dialect.name}"


def _count(engine: Engine, table: Table) -> int:
    with engine.connect() as connection:
        return len(connection.execute(select(table.c.id)).all())


def test_the_issue_case_keeps_the_row_ranked_first(tables: dict[str, Engine]) -> None:
    """Ranks [1, 2, 3] on one shard and [None, None, 0] on another, LIMIT 2."""
    with sharded_session(tables) as session:
        by_shard: dict[str, int] = {}
        for bucket in range(64):
            probe = Ranked(bucket=bucket, name="p")
            session.add(probe)
            session.flush()
            by_shard.setdefault(str(session.get_bind(instance=probe).url), bucket)
            if len(by_shard) >= 2:
                break
        session.rollback()
        first, second = list(by_shard.values())[:2]
        session.add_all([Ranked(bucket=first, rank=r, name="x") for r in (1, 2, 3)])
        session.add_all([Ranked(bucket=second, rank=r, name="x") for r in (None, None, 0)])
        session.commit()
        statement = select(Ranked.rank).order_by(Ranked.rank).limit(2)
        got = list(session.on_all_shards(statement).scalars())
        nulls_high = session.get_bind(shard_id="shard_0").dialect.name == "postgresql"
    assert got == ([0, 1] if nulls_high else [None, None])


def test_unknown_order_is_refused_before_anything_runs(tables: dict[str, Engine]) -> None:
    with sharded_session(tables) as session, pytest.raises(UnmergeableQueryError):
        session.on_all_shards(select(Ranked).order_by(Ranked.rank + 1))
