"""The per-row work of a keyed flush: each new row's shard key is placed once.

``Photo(owner_id=7)`` gets its id when its key is set, from the key. The flush then
routes it and the write guard checks its INSERT; the id the field made for the key the
object still holds fits that key by construction, so neither places the key again.
Counted with wrappers that call through (nothing is timed); what the flush keeps is
covered by test_placement.py and test_explicit_ids.py (a key changed before the flush
gets a new id, an explicit id off its key's database is refused).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import event, func, insert, select
from sqlalchemy.engine import Engine

from uid_fields.errors import WrongShardError
from uid_fields.placement import Placement, authority
from uid_fields.sqlalchemy import listeners, sharded_session

from .models import Photo

pytestmark = pytest.mark.versions

ROWS = 200


@pytest.fixture
def placed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    counted: Counter[str] = Counter()

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return original(*args, **kwargs)

        return wrapper

    for name in ("logical_shard_for_key", "_hash_key"):
        monkeypatch.setattr(Placement, name, counting(name, getattr(Placement, name)))
    # The key hash itself, on every path that places a key (the general one and the
    # placer the key listener binds once per placement).
    monkeypatch.setattr(authority, "mix64", counting("mix64", authority.mix64))
    yield counted


def test_a_keyed_flush_places_each_row_once(
    shards: dict[str, Engine], placed: Counter[str]
) -> None:
    with sharded_session(shards) as session:
        photos = [Photo(owner_id=owner, caption="x") for owner in range(ROWS)]
        session.add_all(photos)
        session.commit()
        assert placed["mix64"] == ROWS  # each key hashed once, when its id was made
        assert placed["logical_shard_for_key"] <= ROWS  # the general path, if taken, once
        assert placed["_hash_key"] <= ROWS
        where = {p.id: session.shard_of(p) for p in photos}
        for photo in photos:  # on the database the key names, with an id made for it
            placement = session.router.table_route(Photo.__table__).placement  # type: ignore[union-attr]
            assert where[photo.id] == placement.database_for_key(photo.owner_id)
            assert placement.fits_key(photo.id, photo.owner_id)
    with sharded_session(shards) as session:
        count = select(func.count()).select_from(Photo)
        assert session.on_all_shards(count).scalar() == ROWS


def test_a_key_changed_before_the_flush_is_placed_again(shards: dict[str, Engine]) -> None:
    with sharded_session(shards) as session:
        placement = session.router.table_route(Photo.__table__).placement  # type: ignore[union-attr]
        home = placement.database_for_key(7)
        away = next(k for k in range(1000) if placement.database_for_key(k) != home)
        photos = [Photo(owner_id=away) for _ in range(5)]
        made = [p.id for p in photos]
        for photo in photos:
            photo.owner_id = 7
        session.add_all(photos)
        session.commit()
        assert all(p.id != m for p, m in zip(photos, made, strict=True))
        assert {session.shard_of(p) for p in photos} == {home}


def test_rows_the_flush_did_not_place_are_still_checked_in_full(
    shards: dict[str, Engine],
) -> None:
    """A Core INSERT run during a flush (here from a before_flush hook) of a row whose
    id disagrees with its key is refused by the write guard: only the rows the flush
    placed itself skip the second placement."""
    with sharded_session(shards) as session:
        placement = session.router.table_route(Photo.__table__).placement  # type: ignore[union-attr]
        home = placement.database_for_key(7)
        other = next(
            k
            for k in range(10_000)
            if placement.database_for_key(k) == home
            and placement.logical_shard_for_key(k) != placement.logical_shard_for_key(7)
        )
        off_key = placement.new_id(other)  # on 7's database, not in 7's logical shard

        def sneak(sess: Any, context: Any, instances: Any) -> None:
            connection = sess.connection(bind_arguments={"shard_id": home})
            connection.execute(insert(Photo.__table__), {"id": off_key, "owner_id": 7})

        event.listen(session, "before_flush", sneak)
        session.add(Photo(owner_id=7))
        with pytest.raises(WrongShardError):
            session.flush()


def test_building_keyed_objects_runs_the_new_object_rule_only_when_a_key_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Photo(owner_id=7)``: the key listener makes the id with the placement's bound
    placer, without the general rule for new objects; a key set again on an object whose
    id the field made still goes through that rule (and gets a new id for the new key)."""
    ruled: Counter[str] = Counter()
    original = listeners.id_for_new_object

    def counting(*args: Any, **kwargs: Any) -> Any:
        ruled["id_for_new_object"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(listeners, "id_for_new_object", counting)
    photos = [Photo(owner_id=owner, caption="x") for owner in range(ROWS)]
    assert ruled["id_for_new_object"] == 0
    assert all(p.id is not None for p in photos)
    made = [p.id for p in photos[:5]]
    for photo in photos[:5]:
        photo.owner_id = photo.owner_id + 1
    assert ruled["id_for_new_object"] == 5
    assert all(p.id != m for p, m in zip(photos[:5], made, strict=True))
