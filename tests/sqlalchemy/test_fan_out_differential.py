"""Every fan-out against one database holding every row: SAME or REFUSED, never different.

The rows live on four shards (documents keyed by their owner, so one owner's documents
are co-located with the owner; notes by their own ids) and, all of them, in one reference
database of the same backend. Each statement runs both ways; the fan-out must answer what
the reference answers (in order where the ORDER BY decides it, as a multiset otherwise),
or raise ``UnmergeableQueryError`` before running anything. What the planner answers
exactly (GROUP BY, DISTINCT, AVG, count(DISTINCT), HAVING, co-located joins) must not be
refused.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    ForeignKey,
    Integer,
    String,
    create_engine,
    distinct,
    exists,
    func,
    insert,
    select,
    text,
    union,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    aliased,
    joinedload,
    mapped_column,
    relationship,
    selectinload,
)

from tests.services import database_name
from uid_fields import ShardedIdGenerator, SnowflakeGenerator
from uid_fields.errors import UnmergeableQueryError
from uid_fields.sqlalchemy import ShardedBigIntField, SnowflakeField, sharded_session
from uid_fields.sqlalchemy.types import SnowflakeType

from .conftest import mysql_url, postgres_url
from .models import ORDER_LAYOUT, PHOTO_LAYOUT

pytestmark = pytest.mark.versions


class Base(DeclarativeBase):
    pass


class Owner(Base):
    __tablename__ = "dx_owners"
    id: Mapped[int] = SnowflakeField(
        generator=SnowflakeGenerator(ORDER_LAYOUT, datacenter=3, worker=1), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(20))
    docs: Mapped[list[Doc]] = relationship(back_populates="owner", order_by="Doc.id")


class Doc(Base):
    """Keyed by its owner (a foreign key to a uid): co-located with the owner row."""

    __tablename__ = "dx_docs"
    id: Mapped[int] = ShardedBigIntField(
        generator=ShardedIdGenerator(PHOTO_LAYOUT), shard_key="owner_id", primary_key=True
    )
    owner_id: Mapped[int] = mapped_column(SnowflakeType(ORDER_LAYOUT), ForeignKey("dx_owners.id"))
    title: Mapped[str] = mapped_column(String(20))
    category: Mapped[str] = mapped_column(String(5))
    score: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner: Mapped[Owner] = relationship(back_populates="docs")


class Note(Base):
    """Placed by its own ids: not co-located with any document."""

    __tablename__ = "dx_notes"
    id: Mapped[int] = SnowflakeField(
        generator=SnowflakeGenerator(ORDER_LAYOUT, datacenter=3, worker=2), primary_key=True
    )
    title: Mapped[str] = mapped_column(String(20))
    weight: Mapped[int] = mapped_column(Integer)
    # An owner's id with no foreign key: the note lives where its own id says.
    owner_id: Mapped[int | None] = mapped_column(SnowflakeType(ORDER_LAYOUT), nullable=True)
    owner: Mapped[Owner | None] = relationship(
        primaryjoin="foreign(Note.owner_id) == Owner.id", viewonly=True
    )


TITLES = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
CATEGORIES = ["a", "b", "c", "d"]
REFERENCE = database_name("uidf_sa_ref", 0)


def _reference_engine(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    if backend == "sqlite":
        return create_engine(f"sqlite:///{tmp_path_factory.mktemp('ref') / 'reference.db'}")
    if backend == "postgresql":
        admin = create_engine(postgres_url("postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {REFERENCE} WITH (FORCE)"))
            connection.execute(text(f"CREATE DATABASE {REFERENCE}"))
        admin.dispose()
        return create_engine(postgres_url(REFERENCE))
    admin = create_engine(mysql_url(None))
    with admin.connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {REFERENCE}"))
        connection.execute(text(f"CREATE DATABASE {REFERENCE}"))
    admin.dispose()
    return create_engine(mysql_url(REFERENCE))


@pytest.fixture(scope="module", params=["sqlite", "postgresql", "mariadb"])
def both(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, Engine], Engine]]:
    """The shards and the reference database, filled with the same rows."""
    shards: dict[str, Engine] = request.getfixturevalue(
        {
            "sqlite": "sqlite_engines",
            "postgresql": "postgres_engines",
            "mariadb": "mariadb_engines",
        }[request.param]
    )
    reference = _reference_engine(request.param, tmp_path_factory)
    for engine in [*shards.values(), reference]:
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    rng = random.Random(34)
    with sharded_session(shards) as session:
        owners = [Owner(name=f"owner{i % 7}") for i in range(12)]
        session.add_all(owners)
        session.flush()
        for i in range(160):
            owner = owners[rng.randrange(len(owners))]
            score = None if i % 11 == 0 else rng.randrange(0, 100)
            session.add(
                Doc(
                    owner_id=owner.id,
                    title=rng.choice(TITLES),
                    category=rng.choice(CATEGORIES),
                    score=score,
                )
            )
        session.add_all(
            [
                Note(title=rng.choice(TITLES), weight=rng.randrange(10), owner_id=owners[i % 12].id)
                for i in range(40)
            ]
        )
        session.commit()
    with reference.begin() as target:
        for table in Base.metadata.sorted_tables:
            rows = []
            for engine in shards.values():
                with engine.connect() as source:
                    rows += [dict(r._mapping) for r in source.execute(select(table))]
            target.execute(insert(table), rows)
    spread = sum(1 for engine in shards.values() if _has_rows(engine, "dx_docs"))
    assert spread >= 3, "the documents must be spread over the shards"
    yield shards, reference
    for engine in [*shards.values(), reference]:
        Base.metadata.drop_all(engine)
    reference.dispose()


def _has_rows(engine: Engine, table: str) -> bool:
    with engine.connect() as connection:
        return bool(connection.execute(text(f"SELECT count(*) FROM {table}")).scalar())


def outcome(
    both: tuple[dict[str, Engine], Engine], statement: Any, ordered: bool
) -> tuple[str, Any, Any]:
    """("SAME" | "REFUSED", fan-out rows, reference rows); asserts they are not different."""
    shards, reference = both
    try:
        with Session(reference) as one:
            expected = [tuple(row) for row in one.execute(statement)]
    except DBAPIError:  # the backend has no such statement (MariaDB: LIMIT in IN)
        with sharded_session(shards) as session, pytest.raises((UnmergeableQueryError, DBAPIError)):
            session.on_all_shards(statement)
        return "REFUSED", None, None
    with sharded_session(shards) as session:
        try:
            got = [tuple(row) for row in session.on_all_shards(statement)]
        except UnmergeableQueryError:
            return "REFUSED", None, expected
    if not ordered:
        got, expected = sorted(got, key=repr), sorted(expected, key=repr)
    assert got == expected, f"{statement}\nfan-out:  {got[:12]}\none database: {expected[:12]}"
    return "SAME", got, expected


d2 = aliased(Doc)

#: (name, statement, ordered: the ORDER BY decides the whole order)
ANSWERED: list[tuple[str, Callable[[], Any], bool]] = [
    ("count(distinct title)", lambda: select(func.count(distinct(Doc.title))), True),
    ("count(distinct score)", lambda: select(func.count(Doc.score.distinct())), True),
    (
        "sum and avg of distinct",
        lambda: select(func.sum(distinct(Doc.score)), func.avg(distinct(Doc.score))),
        True,
    ),
    ("avg", lambda: select(func.avg(Doc.score)), True),
    (
        "all five aggregates",
        lambda: select(
            func.count(),
            func.count(Doc.score),
            func.sum(Doc.score),
            func.min(Doc.score),
            func.max(Doc.score),
            func.avg(Doc.score),
        ),
        True,
    ),
    (
        "group by",
        lambda: select(
            Doc.category,
            func.count(),
            func.sum(Doc.score),
            func.min(Doc.score),
            func.max(Doc.score),
            func.avg(Doc.score),
        ).group_by(Doc.category),
        False,
    ),
    (
        "group by text, ordered",
        lambda: select(Doc.title, func.count().label("n")).group_by(Doc.title).order_by(Doc.title),
        True,
    ),
    (
        "having",
        lambda: (
            select(Doc.title, func.count().label("n")).group_by(Doc.title).having(func.count() > 15)
        ),
        False,
    ),
    (
        "having on an unselected aggregate",
        lambda: (
            select(Doc.category)
            .group_by(Doc.category)
            .having(func.avg(Doc.score) > 45)
            .order_by(Doc.category)
        ),
        True,
    ),
    (
        "order and limit over groups",
        lambda: (
            select(Doc.category, Doc.title, func.count().label("n"))
            .group_by(Doc.category, Doc.title)
            .order_by(func.count().desc(), Doc.category, Doc.title)
            .limit(5)
            .offset(1)
        ),
        True,
    ),
    (
        "count(distinct) per group",
        lambda: select(Doc.category, func.count(distinct(Doc.title))).group_by(Doc.category),
        False,
    ),
    ("distinct", lambda: select(Doc.title).distinct(), False),
    (
        "distinct, ordered, limited",
        lambda: (
            select(Doc.category, Doc.title).distinct().order_by(Doc.category, Doc.title).limit(7)
        ),
        True,
    ),
    ("count", lambda: select(func.count()).select_from(Doc), True),
    (
        "count over a filtering subquery (Query.count())",
        lambda: select(func.count()).select_from(select(Doc).where(Doc.score > 40).subquery()),
        True,
    ),
    (
        "aggregate over a co-located join",
        lambda: (
            select(Owner.name, func.count(Doc.id), func.avg(Doc.score))
            .join(Doc, Doc.owner_id == Owner.id)
            .group_by(Owner.name)
        ),
        False,
    ),
    (
        "groups by the shard key (whole on their shard)",
        lambda: (
            select(Doc.owner_id, func.count(), func.max(Doc.score))
            .group_by(Doc.owner_id)
            .order_by(Doc.owner_id)
        ),
        True,
    ),
    (
        "co-located EXISTS",
        lambda: select(Owner.id).where(
            exists(select(Doc.id).where(Doc.owner_id == Owner.id, Doc.score > 95))
        ),
        False,
    ),
    (
        "co-located IN",
        lambda: select(Doc.id).where(
            Doc.owner_id.in_(select(Owner.id).where(Owner.name == "owner3"))
        ),
        False,
    ),
]

#: Statements that one database answers in a way per-shard answers cannot repeat.
REFUSED_OR_SAME: list[tuple[str, Callable[[], Any], bool]] = [
    (
        "count over a LIMIT subquery",
        lambda: select(func.count()).select_from(select(Doc.id).limit(5).subquery()),
        True,
    ),
    (
        "count over a DISTINCT subquery",
        lambda: select(func.count()).select_from(select(Doc.title).distinct().subquery()),
        True,
    ),
    (
        "IN a limited subquery",
        lambda: select(Doc.id).where(Doc.id.in_(select(Doc.id).order_by(Doc.id).limit(3))),
        False,
    ),
    (
        "above the average",
        lambda: select(Doc.id).where(Doc.score > select(func.avg(Doc.score)).scalar_subquery()),
        False,
    ),
    (
        "row_number()",
        lambda: select(Doc.id, func.row_number().over(order_by=Doc.id)),
        False,
    ),
    ("count(*) over ()", lambda: select(Doc.id, func.count().over()), False),
    (
        "self-join on a non-key column",
        lambda: select(func.count()).select_from(Doc).join(d2, d2.title == Doc.title),
        True,
    ),
    (
        "join of tables that are not co-located",
        lambda: select(func.count()).select_from(Doc).join(Note, Note.title == Doc.title),
        True,
    ),
    ("a ratio of aggregates", lambda: select(func.sum(Doc.score) / func.count(Doc.score)), True),
    ("union", lambda: union(select(Doc.title), select(Note.title)), False),
    (
        "IN a subquery of another table's column",
        lambda: select(Doc.id).where(Doc.title.in_(select(Note.title))),
        False,
    ),
    (
        "a correlated subquery on a non-key column",
        lambda: select(Doc.id).where(exists(select(Note.id).where(Note.title == Doc.title))),
        False,
    ),
    ("for update", lambda: select(Doc.id).with_for_update(), False),
]


@pytest.mark.parametrize(("name", "make", "ordered"), ANSWERED, ids=[n for n, _, _ in ANSWERED])
def test_answered_exactly(
    both: tuple[dict[str, Engine], Engine], name: str, make: Callable[[], Any], ordered: bool
) -> None:
    verdict, got, _ = outcome(both, make(), ordered)
    assert verdict == "SAME", f"{name} was refused"
    assert got, f"{name}: the data must give it rows"


@pytest.mark.parametrize(
    ("name", "make", "ordered"), REFUSED_OR_SAME, ids=[n for n, _, _ in REFUSED_OR_SAME]
)
def test_never_different(
    both: tuple[dict[str, Engine], Engine], name: str, make: Callable[[], Any], ordered: bool
) -> None:
    outcome(both, make(), ordered)


def test_refusals_name_the_construct(both: tuple[dict[str, Engine], Engine]) -> None:
    shards, _ = both
    cases = {
        "a subquery with LIMIT": REFUSED_OR_SAME[0][1](),
        "window function": REFUSED_OR_SAME[4][1](),
        "not co-located": REFUSED_OR_SAME[7][1](),
        "inside an expression": REFUSED_OR_SAME[8][1](),
        "set operation": REFUSED_OR_SAME[9][1](),
        "FOR UPDATE": REFUSED_OR_SAME[12][1](),
    }
    with sharded_session(shards) as session:
        for words, statement in cases.items():
            with pytest.raises(UnmergeableQueryError, match=words):
                session.on_all_shards(statement)


GROUPS = {"none": None, "category": Doc.category, "title": Doc.title}
AGGREGATES: dict[str, Callable[[], Any]] = {
    "count": lambda: func.count(),
    "count_score": lambda: func.count(Doc.score),
    "sum": lambda: func.sum(Doc.score),
    "min": lambda: func.min(Doc.score),
    "max": lambda: func.max(Doc.score),
    "avg": lambda: func.avg(Doc.score),
    "count_distinct": lambda: func.count(distinct(Doc.title)),
}


@st.composite
def statements(draw: st.DrawFn) -> tuple[Any, bool]:
    """A grouped or aggregate statement composed of the constructs the planner answers."""
    group = draw(st.sampled_from(sorted(GROUPS)))
    names = draw(st.lists(st.sampled_from(sorted(AGGREGATES)), min_size=1, max_size=3, unique=True))
    columns = [AGGREGATES[n]().label(n) for n in names]
    key = GROUPS[group]
    statement = select(*([key] if key is not None else []), *columns)
    if draw(st.booleans()):
        statement = statement.where(Doc.score > draw(st.integers(0, 90)))
    if key is None:
        statement = statement.select_from(Doc)
        return statement, True
    statement = statement.group_by(key)
    if draw(st.booleans()):
        statement = statement.having(func.count() > draw(st.integers(0, 20)))
    ordered = draw(st.booleans())
    if ordered:
        statement = statement.order_by(key.desc() if draw(st.booleans()) else key)
        if draw(st.booleans()):
            statement = statement.limit(draw(st.integers(1, 6))).offset(draw(st.integers(0, 2)))
    return statement, ordered


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(statements())
def test_composed_statements_are_answered_as_one_database(
    both: tuple[dict[str, Engine], Engine], case: tuple[Any, bool]
) -> None:
    statement, ordered = case
    verdict, _, _ = outcome(both, statement, ordered)
    assert verdict == "SAME", f"refused: {statement}"


def test_average_is_the_databases_own(both: tuple[dict[str, Engine], Engine]) -> None:
    """Digit for digit: PostgreSQL's NUMERIC scale, MariaDB's four digits, SQLite's float."""
    _, got, expected = outcome(both, select(func.avg(Doc.score)), True)
    assert type(got[0][0]) is type(expected[0][0])
    if isinstance(expected[0][0], Decimal):
        assert str(got[0][0]) == str(expected[0][0])


@pytest.mark.parametrize("limit", [2, 5])
def test_joined_collection_with_limit_limits_the_parents(
    both: tuple[dict[str, Engine], Engine], limit: int
) -> None:
    """SQLAlchemy limits the parents in a subquery, then joins their children; over
    shards the window counts parents, not the joined rows (before: 1 owner for 2 and 5)."""
    shards, reference = both
    statement = select(Owner).options(joinedload(Owner.docs)).order_by(Owner.id).limit(limit)
    with Session(reference) as one:
        expected = [(o.id, [d.id for d in o.docs]) for o in one.scalars(statement).unique()]
    with sharded_session(shards) as session:
        owners = session.on_all_shards(statement).unique().scalars().all()
        got = [(o.id, [d.id for d in o.docs]) for o in owners]
    assert len(expected) == limit and got == expected


def test_an_eager_load_of_rows_elsewhere_is_refused_or_read_where_they_live(
    both: tuple[dict[str, Engine], Engine],
) -> None:
    """A note's owner may live on another shard: joinedload would find it only on the
    note's shard (before: 30 of 40 owners None); selectinload reads it where it lives."""
    shards, reference = both
    with Session(reference) as one:
        expected = sorted((n.id, n.owner.id) for n in one.scalars(select(Note)) if n.owner)
    with sharded_session(shards) as session:
        with pytest.raises(UnmergeableQueryError, match="joinedload"):
            session.on_all_shards(select(Note).options(joinedload(Note.owner)))
        notes = session.on_all_shards(
            select(Note).options(selectinload(Note.owner)).order_by(Note.id)
        ).scalars()
        got = sorted((n.id, n.owner.id) for n in notes if n.owner is not None)
    assert len(expected) == 40 and got == expected


ROUTED: list[tuple[str, Callable[[Any], Any], bool]] = [
    (
        "ORDER BY and LIMIT",
        lambda owners: (
            select(Doc.id).where(Doc.owner_id.in_(owners)).order_by(Doc.id.desc()).limit(3)
        ),
        True,
    ),
    (
        "DISTINCT",
        lambda owners: select(Doc.title).where(Doc.owner_id.in_(owners)).distinct(),
        False,
    ),
    (
        "GROUP BY",
        lambda owners: (
            select(Doc.category, func.count(), func.avg(Doc.score))
            .where(Doc.owner_id.in_(owners))
            .group_by(Doc.category)
        ),
        False,
    ),
    ("count", lambda owners: select(func.count()).where(Doc.owner_id.in_(owners)), True),
    (
        "objects, ordered and limited",
        lambda owners: (
            select(Doc).where(Doc.owner_id.in_(owners)).order_by(Doc.score, Doc.id).limit(4)
        ),
        True,
    ),
]


@pytest.mark.parametrize(("name", "make", "ordered"), ROUTED, ids=[n for n, _, _ in ROUTED])
def test_a_statement_routed_to_several_shards_is_combined(
    both: tuple[dict[str, Engine], Engine], name: str, make: Callable[[Any], Any], ordered: bool
) -> None:
    """Criteria that name several shards (``owner_id IN (...)``) are answered as one
    database answers, through the plain ``session.execute``: before, each shard's rows
    came one after another (LIMIT 3 gave 3 rows per shard, DISTINCT repeated values)."""
    shards, reference = both
    with Session(reference) as one:
        owners = one.scalars(select(Owner.id).order_by(Owner.id)).all()
    statement = make(owners[:6])

    def plain(row: Any) -> tuple[Any, ...]:
        return (row.id, row.score) if isinstance(row, Doc) else tuple(row)

    with Session(reference) as one:
        expected = [plain(r[0] if isinstance(r[0], Doc) else r) for r in one.execute(statement)]
    with sharded_session(shards) as session:
        assert len(session.router.statement_shards(statement, {}) or ()) >= 2
        got = [plain(r[0] if isinstance(r[0], Doc) else r) for r in session.execute(statement)]
    if not ordered:
        got, expected = sorted(got, key=repr), sorted(expected, key=repr)
    assert got == expected


def test_distinct_objects_are_the_rows_of_one_database(
    both: tuple[dict[str, Engine], Engine],
) -> None:
    """``select(Owner).distinct()``: objects of different shards are different rows
    (before: a TypeError while the merge compared them as tuples, a 500)."""
    shards, reference = both
    statement = select(Owner).distinct().order_by(Owner.id)
    with Session(reference) as one:
        expected = [o.id for o in one.scalars(statement)]
    with sharded_session(shards) as session:
        got = [o.id for o in session.on_all_shards(statement).scalars()]
        unordered = [o.id for o in session.on_all_shards(select(Owner).distinct()).scalars()]
    assert got == expected and len(expected) == 12
    assert sorted(unordered) == sorted(expected)
