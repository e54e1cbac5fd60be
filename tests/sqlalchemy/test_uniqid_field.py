"""The SQLAlchemy uniqid field: the twin of Django's ``UniqIdField``, routed by its shard
digit, decoded on the instance, and a malformed id refused before SQL runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import String, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from uid_fields import UniqIdGenerator, uniqid
from uid_fields.sqlalchemy import UniqIdField, sharded_session

from .conftest import SHARDS, recording

pytestmark = pytest.mark.versions


class UniqBase(DeclarativeBase):
    pass


class Ticket(UniqBase):
    __tablename__ = "tickets"
    id: Mapped[str] = UniqIdField(generator=UniqIdGenerator(total_shards=4), primary_key=True)
    title: Mapped[str] = mapped_column(String(20), default="")


@pytest.fixture
def tables(sqlite_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    for engine in sqlite_engines.values():
        UniqBase.metadata.create_all(engine)
    yield sqlite_engines
    for engine in sqlite_engines.values():
        UniqBase.metadata.drop_all(engine)


def test_rows_live_on_the_shard_their_digit_names(tables: dict[str, Engine]) -> None:
    with sharded_session(tables) as session:
        tickets = [Ticket(title=f"t{i}") for i in range(24)]
        session.add_all(tickets)
        session.commit()
        ids = [t.id for t in tickets]
    for value in ids:
        shard = uniqid.decompose(value, 4).shard
        with tables[SHARDS[shard]].connect() as connection:
            assert connection.execute(select(Ticket.id).where(Ticket.id == value)).one()
    assert len({uniqid.decompose(v, 4).shard for v in ids}) > 1
    with sharded_session(tables) as session:
        found = session.get(Ticket, ids[0])
        assert found is not None and found.title == "t0"
        assert found.id_parts.shard == uniqid.decompose(ids[0], 4).shard  # type: ignore[attr-defined]
        everything = session.on_all_shards(select(Ticket)).scalars().all()
        assert [t.id for t in everything] == sorted(ids)


def test_a_malformed_id_is_refused_before_sql(tables: dict[str, Engine]) -> None:
    with sharded_session(tables) as session, recording(tables) as log:
        assert session.get(Ticket, "not-a-uniqid") is None  # no shard can hold it
        assert log.count() == 0
    engine = tables["shard_0"]
    with engine.connect() as connection, pytest.raises(StatementError, match="uniqid"):
        connection.execute(insert(Ticket.__table__), [{"id": "x" * 18, "title": "t"}])
