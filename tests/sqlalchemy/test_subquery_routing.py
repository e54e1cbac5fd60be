"""A statement that reads only FROM subqueries is confined to the shards the subqueries'
own criteria name: legacy ``Query.count()`` (``SELECT count(*) FROM (SELECT ... WHERE
owner_id = :k) AS anon_1``) and Flask-SQLAlchemy's page counts are statements of that
shape, and went nowhere (``ShardRoutingError``) although the key names one shard."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from uid_fields.sqlalchemy import ShardRoutingError, sharded_session

from .conftest import SHARDS, recording
from .models import Order, Photo

pytestmark = pytest.mark.versions


def _photos_of_keys(shards: dict[str, Engine]) -> dict[int, tuple[str, int]]:
    """Photos of owners spread until every shard has one: owner -> (shard, how many)."""
    found: dict[int, tuple[str, int]] = {}
    with sharded_session(shards) as session:
        for owner in range(1, 40):
            photos = [Photo(owner_id=owner, caption=f"p{n}") for n in range(owner % 3 + 2)]
            session.add_all(photos)
            session.flush()
            found[owner] = (session.shard_of(photos[0]), len(photos))
        session.commit()
    assert {shard for shard, _ in found.values()} == set(SHARDS)
    return found


def test_query_count_of_a_key_reads_its_shard_only(shards: dict[str, Engine]) -> None:
    placed = _photos_of_keys(shards)
    for owner in (1, 2, 3, 7):
        shard, many = placed[owner]
        with sharded_session(shards) as session, recording(shards) as log:
            assert session.query(Photo).filter(Photo.owner_id == owner).count() == many
            assert session.query(Photo).filter_by(owner_id=owner).count() == many
            assert log.engines_used() == {shard}
            assert log.count(kind="SELECT") == 2


def test_select_from_a_routed_subquery_reads_its_shard_only(shards: dict[str, Engine]) -> None:
    placed = _photos_of_keys(shards)
    shard, many = placed[5]
    with sharded_session(shards) as session, recording(shards) as log:
        mine = select(Photo).where(Photo.owner_id == 5).subquery()
        assert session.execute(select(func.count()).select_from(mine)).scalar() == many
        # criteria of the outer statement that route nothing only narrow further
        captions = select(mine.c.caption).where(mine.c.caption != "p0").order_by(mine.c.caption)
        assert session.scalars(captions).all() == [f"p{n}" for n in range(1, many)]
        # a subquery of a subquery: the innermost criteria still confine the rows
        outer = select(func.count()).select_from(select(mine.c.id).subquery())
        assert session.execute(outer).scalar() == many
        assert log.engines_used() == {shard}
        # the id of an order confines as its shard key does
        order = Order(customer="x")
        session.add(order)
        session.commit()
        log.clear()
        assert session.query(Order).filter(Order.id == order.id).count() == 1
        assert log.engines_used(kind="SELECT") == {session.shard_of(order)}


def test_subqueries_with_other_unconfined_rows_are_still_refused(
    shards: dict[str, Engine],
) -> None:
    _photos_of_keys(shards)
    mine = select(Photo).where(Photo.owner_id == 5).subquery()
    everyone = select(Photo).where(Photo.caption == "p0").subquery()
    refused = [
        select(func.count()).select_from(everyone),  # no key in the subquery
        select(func.count()).select_from(mine).select_from(Order),  # orders of every shard
        select(Order.id).outerjoin(mine, mine.c.caption == Order.customer),  # every order
        select(func.count()).select_from(mine).select_from(everyone),
    ]
    with sharded_session(shards) as session, recording(shards) as log:
        for statement in refused:
            with pytest.raises(ShardRoutingError, match="names no shard"):
                session.execute(statement)
        with pytest.raises(ShardRoutingError, match="names no shard"):
            session.query(Photo).filter(Photo.caption == "p0").count()
        assert log.count() == 0


def test_subqueries_of_two_keys_narrow_each_other(shards: dict[str, Engine]) -> None:
    placed = _photos_of_keys(shards)
    apart = next(o for o in placed if placed[o][0] != placed[1][0])
    same = next(o for o in placed if o != 1 and placed[o][0] == placed[1][0])
    ones = select(Photo.id).where(Photo.owner_id == 1).subquery()
    with sharded_session(shards) as session, recording(shards) as log:
        together = select(Photo.id).where(Photo.owner_id == same).subquery()
        both = select(func.count()).select_from(ones).join(together, ones.c.id == together.c.id)
        assert session.execute(both).scalar() == 0  # no photo has two owners
        assert log.engines_used() == {placed[1][0]}
        log.clear()
        elsewhere = select(Photo.id).where(Photo.owner_id == apart).subquery()
        # no shard holds rows of both: any one says so (as contradictory criteria do)
        crossed = (
            select(func.count()).select_from(ones).join(elsewhere, ones.c.id == elsewhere.c.id)
        )
        assert session.execute(crossed).scalar() == 0
        assert log.count(kind="SELECT") == 1


def test_an_aggregate_over_two_shards_is_combined_over_those_two(
    shards: dict[str, Engine],
) -> None:
    """Each shard counts its own rows; run unmerged, the first shard's count would be
    the answer (a paginate() total of one shard). Planned over the two shards the
    criteria name, the counts add up, and no other shard is asked."""
    placed = _photos_of_keys(shards)
    one = 1
    other = next(o for o in placed if placed[o][0] != placed[one][0])
    expected = placed[one][1] + placed[other][1]
    keys = Photo.owner_id.in_([one, other])
    with sharded_session(shards) as session, recording(shards) as log:
        assert session.query(Photo).filter(keys).count() == expected
        assert session.execute(select(func.count()).where(keys)).scalar() == expected
        highest = session.execute(select(func.max(Photo.id)).where(keys)).scalar()
        assert highest == max(session.scalars(select(Photo.id).where(keys)).all())
        assert log.engines_used(kind="SELECT") == {placed[one][0], placed[other][0]}
        counted = select(func.count()).select_from(select(Photo).where(keys).subquery())
        assert session.on_all_shards(counted).scalar() == expected
        # rows of the two shards, one after another, are still theirs to read
        assert len(session.scalars(select(Photo).where(keys)).all()) == expected
        assert log.engines_used(kind="SELECT") == set(SHARDS)
