"""Placement on the SQLAlchemy side: the core decides, per table, as on the Django side."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import BigInteger, ForeignKey, String, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    joinedload,
    mapped_column,
    relationship,
    subqueryload,
)

from uid_fields import (
    INSTAGRAM,
    TWITTER,
    ConfigurationError,
    ShardedIdGenerator,
    ShardMap,
    SnowflakeGenerator,
    WrongShardError,
)
from uid_fields.placement import ByField, route_for
from uid_fields.sqlalchemy import ShardedBigIntField, SnowflakeField, sharded_session
from uid_fields.sqlalchemy.types import SnowflakeType

from .conftest import SHARDS, recording

EPOCH_MS = 1_704_067_200_000
people = SnowflakeGenerator(TWITTER.replace(epoch_ms=EPOCH_MS), datacenter=2, worker=1)
things = SnowflakeGenerator(TWITTER.replace(epoch_ms=EPOCH_MS), datacenter=2, worker=2)
orders = ShardedIdGenerator(INSTAGRAM.replace(epoch_ms=EPOCH_MS))


class Base(DeclarativeBase):
    pass


class Shopper(Base):
    __tablename__ = "pl_shopper"
    id: Mapped[int] = SnowflakeField(generator=people, primary_key=True)
    name: Mapped[str] = mapped_column(String(20), default="")


class Basket(Base):
    """Lives with its shopper: the shard key is a foreign key to a sharded table."""

    __tablename__ = "pl_basket"
    id: Mapped[int] = ShardedBigIntField(generator=orders, shard_key="shopper_id", primary_key=True)
    shopper_id: Mapped[int] = mapped_column(SnowflakeType(), ForeignKey("pl_shopper.id"))
    shopper: Mapped[Shopper] = relationship()
    lines: Mapped[list[Line]] = relationship(back_populates="basket", order_by="Line.id")


class Line(Base):
    """A uid id of its own that names no shard: it lives with its basket."""

    __tablename__ = "pl_line"
    id: Mapped[int] = SnowflakeField(generator=things, primary_key=True)
    basket_id: Mapped[int] = mapped_column(SnowflakeType(), ForeignKey("pl_basket.id"))
    sku: Mapped[str] = mapped_column(String(20), default="")
    basket: Mapped[Basket] = relationship(back_populates="lines")


class Note(Base):
    """Placed by a map of its own over two of the session's four shards."""

    __tablename__ = "pl_note"
    id: Mapped[int] = SnowflakeField(
        generator=things,
        shards=ShardMap(["shard_1", "shard_3"], route=route_for(things)),
        primary_key=True,
    )
    owner: Mapped[int] = mapped_column(BigInteger, default=0)


@pytest.fixture(params=["sqlite", "postgresql"])
def engines(request: pytest.FixtureRequest) -> Iterator[dict[str, Engine]]:
    made: dict[str, Engine] = request.getfixturevalue(
        {"sqlite": "sqlite_engines", "postgresql": "postgres_engines"}[request.param]
    )
    for engine in made.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)  # with foreign-key constraints on PostgreSQL
    yield made
    for engine in made.values():
        Base.metadata.drop_all(engine)


def _home(engines: dict[str, Engine], table: str, pk: int) -> str:
    found = []
    for name, engine in engines.items():
        with engine.connect() as connection:
            if connection.execute(text(f"SELECT 1 FROM {table} WHERE id = {int(pk)}")).first():
                found.append(name)
    assert len(found) == 1, (table, pk, found)
    return found[0]


def test_children_keyed_by_a_parent_live_on_its_database(engines: dict[str, Engine]) -> None:
    with sharded_session(engines) as session:
        shoppers = [Shopper(name=str(i)) for i in range(20)]
        session.add_all(shoppers)
        session.flush()
        baskets = [
            Basket(shopper=s) if n % 2 else Basket(shopper_id=s.id)
            for s in shoppers
            for n in range(3)
        ]
        session.add_all(baskets)
        session.commit()  # foreign keys hold on PostgreSQL: every child is with its parent
        placed = [(b.id, b.shopper_id) for b in baskets]
    assert len(placed) == 60
    for basket_id, shopper_id in placed:
        assert _home(engines, "pl_basket", basket_id) == _home(engines, "pl_shopper", shopper_id)


def test_a_child_with_its_own_uid_id_lives_with_its_parent(engines: dict[str, Engine]) -> None:
    with sharded_session(engines) as session:
        shopper = Shopper(name="x")
        baskets = [Basket(shopper=shopper) for _ in range(4)]
        for basket in baskets:
            basket.lines = [Line(sku=str(n)) for n in range(10)]
        session.add_all(baskets)
        session.commit()
        ids = [b.id for b in baskets]
    for loader in (None, joinedload, subqueryload):
        with sharded_session(engines) as session:
            for basket_id in ids:
                query = select(Basket).where(Basket.id == basket_id)
                if loader is not None:
                    query = query.options(loader(Basket.lines))
                basket = session.scalars(query).unique().one()
                assert len(basket.lines) == 10, loader
                assert {session.shard_of(line) for line in basket.lines} == {
                    session.shard_of(basket)
                }


def test_a_session_map_that_cannot_read_a_tables_ids_is_refused(
    engines: dict[str, Engine],
) -> None:
    instagram_map = ShardMap(SHARDS, route=ByField(INSTAGRAM))
    with sharded_session(engines, shard_map=instagram_map) as session, recording(engines) as log:
        session.add(Shopper(name="twitter ids"))
        with pytest.raises(ConfigurationError, match="cannot route"):
            session.flush()
        assert log.count() == 0  # nothing was sent anywhere
        session.rollback()


def test_a_fields_own_map_overrides_the_session_default(engines: dict[str, Engine]) -> None:
    with sharded_session(engines) as session:
        notes = [Note(owner=i) for i in range(40)]
        session.add_all(notes)
        session.commit()
        homes = {session.shard_of(n) for n in notes}
    assert homes == {"shard_1", "shard_3"}
    lone = sharded_session({"shard_0": engines["shard_0"]})
    with lone as session, pytest.raises(ConfigurationError, match="not shards of this session"):
        session.add(Note())
        session.flush()


def test_re_parenting_onto_another_database_is_refused(engines: dict[str, Engine]) -> None:
    with sharded_session(engines) as session:
        shoppers = [Shopper(name=str(i)) for i in range(12)]
        baskets = [Basket(shopper=s) for s in shoppers]
        session.add_all(baskets)
        session.flush()
        by_shard: dict[str, list[Basket]] = {}
        for basket in baskets:
            by_shard.setdefault(session.shard_of(basket), []).append(basket)
        assert len(by_shard) > 1
        (home, mine), (_elsewhere, theirs) = list(by_shard.items())[:2]
        line = Line(sku="x")
        mine[0].lines.append(line)
        session.commit()
        with recording(engines) as log:
            line.basket = theirs[0]
            with pytest.raises(WrongShardError, match="cannot change shards"):
                session.flush()
            assert log.count(kind="UPDATE") == 0
        session.rollback()
        if len(mine) > 1:  # a new parent on the same database is fine
            line = (
                session.get(Line, line.id)
                or session.scalars(select(Line).where(Line.basket_id == mine[0].id)).one()
            )
            line.basket = mine[1]
            session.commit()
            assert session.shard_of(line) == home


def test_re_keying_a_co_located_child_onto_another_database_is_refused(
    engines: dict[str, Engine],
) -> None:
    """A shard key that is a foreign key to the parent: a new parent of another database
    is a key change (the core's check_key_change), through the ORM and through Core."""
    with sharded_session(engines) as session:
        shoppers = [Shopper(name=str(i)) for i in range(16)]
        session.add_all(shoppers)
        session.flush()
        by_shard: dict[str, list[Shopper]] = {}
        for shopper in shoppers:
            by_shard.setdefault(session.shard_of(shopper), []).append(shopper)
        (home, mine), (_there, theirs) = [
            (name, found) for name, found in by_shard.items() if len(found) > 1
        ][:2]
        basket = Basket(shopper=mine[0])
        session.add(basket)
        session.commit()
        assert session.shard_of(basket) == home
        basket.shopper = theirs[0]
        with pytest.raises(WrongShardError, match="shopper_id"):
            session.flush()
        session.rollback()
        with pytest.raises(WrongShardError, match="shopper_id"):
            session.execute(
                update(Basket).where(Basket.id == basket.id).values(shopper_id=theirs[0].id)
            )
        session.rollback()
        kept = session.scalars(select(Basket).where(Basket.shopper_id == mine[0].id)).one()
        assert kept.id == basket.id  # still found by its key
        session.execute(update(Basket).where(Basket.id == basket.id).values(shopper_id=mine[1].id))
        session.commit()
        moved = session.scalars(select(Basket).where(Basket.shopper_id == mine[1].id)).one()
        assert moved.id == basket.id
