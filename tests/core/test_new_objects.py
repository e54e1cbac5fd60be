"""The core's rule for ids a caller chose: a new object's id and key, a stored row's new id."""

from __future__ import annotations

import pytest

from uid_fields import (
    INSTAGRAM,
    TWITTER,
    ManualClock,
    ShardedIdGenerator,
    ShardKeyError,
    ShardMap,
    SnowflakeGenerator,
    WrongShardError,
)
from uid_fields.placement import (
    ByField,
    Placement,
    allow_off_shard_writes,
    check_id_change,
    check_key_change,
    id_for_new_object,
    ids_for_new_objects,
    route_for,
)

DBS = ["shard_0", "shard_1", "shard_2", "shard_3"]
NOW_MS = 1_735_689_600_000


def _photos() -> Placement:
    generator = ShardedIdGenerator(INSTAGRAM, clock=ManualClock(NOW_MS))
    return Placement(generator, ShardMap(DBS, route=ByField(INSTAGRAM)), name="Photo.id")


def _other_key(placement: Placement, key: int) -> int:
    home = placement.database_for_key(key)
    return next(k for k in range(1000) if placement.database_for_key(k) != home)


def test_neither_id_nor_key() -> None:
    placement = _photos()
    with pytest.raises(ShardKeyError, match=r"Photo\.owner_id must be set"):
        id_for_new_object(placement, None, None, keyed=True, what="Photo", key_name="owner_id")
    keyless = id_for_new_object(placement, None, None, keyed=False)
    assert keyless.made and placement.database_of(keyless.value) in DBS


def test_key_only_makes_an_id_from_the_key() -> None:
    placement = _photos()
    chosen = id_for_new_object(placement, None, 7, keyed=True)
    assert chosen.made and placement.fits_key(chosen.value, 7)


def test_id_only_is_kept_and_placed_by_itself() -> None:
    placement = _photos()
    given = placement.new_id(3)
    assert id_for_new_object(placement, given, None, keyed=True).value == given


def test_an_agreeing_id_is_kept() -> None:
    placement = _photos()
    given = placement.new_id(7)
    chosen = id_for_new_object(placement, given, 7, keyed=True)
    assert chosen.value == given and not chosen.made


def test_a_disagreeing_id_is_refused_naming_id_key_and_databases() -> None:
    placement = _photos()
    given = placement.new_id(_other_key(placement, 7))
    with pytest.raises(WrongShardError) as caught:
        id_for_new_object(placement, given, 7, keyed=True, what="Photo", key_name="owner_id")
    message = str(caught.value)
    assert str(given) in message and "owner_id=7" in message
    assert placement.database_of(given) in message
    assert placement.database_for_key(7) in message
    assert caught.value.database == placement.database_of(given)
    assert caught.value.expected == placement.database_for_key(7)
    with allow_off_shard_writes():  # the opt-out: the id as given
        assert id_for_new_object(placement, given, 7, keyed=True).value == given


def test_the_fields_own_id_follows_its_key() -> None:
    placement = _photos()
    made = placement.new_id(_other_key(placement, 7))
    chosen = id_for_new_object(placement, made, 7, keyed=True, ours=True)
    assert chosen.made and chosen.value != made and placement.fits_key(chosen.value, 7)


def test_another_logical_shard_on_the_same_database_is_a_mismatch() -> None:
    placement = _photos()
    home = placement.database_for_key(7)
    own = placement.logical_shard_for_key(7)
    key = next(
        k
        for k in range(10_000)
        if placement.database_for_key(k) == home and placement.logical_shard_for_key(k) != own
    )
    given = placement.new_id(key)
    with pytest.raises(WrongShardError, match="split"):
        id_for_new_object(placement, given, 7, keyed=True)


def test_database_made_ids_agree_by_database() -> None:
    placement = _photos()
    generator = placement.generator
    home = placement.database_for_key(7)
    stamped = generator.next_id(shard=placement.shard_map.ranges[home][0])  # type: ignore[union-attr]
    assert id_for_new_object(placement, stamped, 7, keyed=True, database_made=True).value == stamped
    with pytest.raises(WrongShardError):
        id_for_new_object(placement, stamped, 7, keyed=True)  # a Python-made id must fit


def test_a_batch_gives_the_same_answers_and_checks_every_row_first() -> None:
    placement = _photos()
    kept = placement.new_id(7)
    chosen = ids_for_new_objects(placement, [None, kept, None], [7, 7, 9], keyed=True)
    assert chosen[1].value == kept and not chosen[1].made
    assert chosen[0].made and placement.fits_key(chosen[0].value, 7)
    assert chosen[2].made and placement.fits_key(chosen[2].value, 9)
    stray = placement.new_id(_other_key(placement, 7))
    with pytest.raises(WrongShardError):
        ids_for_new_objects(placement, [None, stray], [7, 7], keyed=True)
    with pytest.raises(ShardKeyError):
        ids_for_new_objects(placement, [kept, None], [7, None], keyed=True)
    keyless = ids_for_new_objects(placement, [None] * 8, None, keyed=False)
    assert all(c.made for c in keyless) and len({c.value for c in keyless}) == 8


def test_a_stored_rows_new_id_must_name_its_database() -> None:
    generator = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS))
    placement = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    old = generator.next_id()
    home = placement.database_of(old)
    ids = generator.next_ids(200)
    same = next(i for i in ids if placement.database_of(i) == home)
    other = next(i for i in ids if placement.database_of(i) != home)
    check_id_change(placement, same, home, old=old)
    with pytest.raises(WrongShardError) as caught:
        check_id_change(placement, other, home, old=old, what="Order")
    assert str(other) in str(caught.value) and str(old) in str(caught.value)
    assert caught.value.database == home
    assert caught.value.expected == placement.database_of(other)
    with allow_off_shard_writes():
        check_id_change(placement, other, home)


def test_a_stored_rows_new_shard_key_must_keep_it_on_its_database() -> None:
    """A key change is the same disagreement as a new row's: refused unless the new key's
    rows live where the row is (an UPDATE leaves it there)."""
    placement = _photos()
    home = placement.database_for_key(7)
    same = next(k for k in range(8, 1000) if placement.database_for_key(k) == home)
    other = _other_key(placement, 7)
    check_key_change(placement, same, home, old=7)  # stays on its database: allowed
    with pytest.raises(WrongShardError) as caught:
        check_key_change(placement, other, home, old=7, what="Photo", name="owner_id")
    message = str(caught.value)
    assert f"owner_id={other}" in message and "from 7" in message and home in message
    assert caught.value.database == home
    assert caught.value.expected == placement.database_for_key(other)
    with allow_off_shard_writes():
        check_key_change(placement, other, home)
    # A follower's parent id is placed as an id.
    parent = placement.new_id(other)
    with pytest.raises(WrongShardError):
        check_key_change(placement, parent, home, by_id=True)
    check_key_change(placement, parent, placement.database_of(parent), by_id=True)


def test_an_id_made_for_one_database_names_that_database() -> None:
    """``new_id_on``: what a one-shard connection (a data migration) makes its ids by;
    for every generator the database is the one asked for, never a random one."""
    photos = _photos()
    generator = SnowflakeGenerator(TWITTER, clock=ManualClock(NOW_MS))
    orders = Placement(generator, ShardMap(DBS, route=route_for(generator)))
    for placement in (photos, orders):
        for database in DBS:
            made = [placement.new_id_on(database) for _ in range(40)]
            assert {placement.database_of(value) for value in made} == {database}
            assert len(set(made)) == 40
    home = photos.database_for_key(7)
    assert photos.database_of(photos.new_id_on(DBS[0], 7)) == home  # the key decides
