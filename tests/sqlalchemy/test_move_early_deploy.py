"""The portable mover run under the old map after the new map reached part of the fleet
(issue 35): before the switch its copy makes the target equal to the source, so rows the
new map wrote on the target looked like rows the source had deleted, and were deleted.

Rows made on the target after the last copy ended cannot be copies (every row a pass
copied was made before it ended): the copy and the switch refuse to delete them, name
them and remove the fence; ``abort(copy_back=True)`` then puts every row on the source
once. On SQLite, with no clock skew between the writers (``margin_ms=0``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from uid_fields.ops.move_recovery import TargetWritten
from uid_fields.sqlalchemy import shard_move, sharded_session

from .models import PHOTO_LAYOUT
from .test_move_shards import BEFORE, New, Old

LOW, HIGH = 6144, 8192


@pytest.fixture
def engines(sqlite_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    three = {name: sqlite_engines[name] for name in ("shard_0", "shard_1", "shard_2")}
    metadata = Old[0].metadata
    for engine in three.values():
        metadata.drop_all(engine)
        metadata.create_all(engine)
    yield three
    for engine in three.values():
        metadata.drop_all(engine)


def photos_in_range(
    engines: dict[str, Engine], models: tuple[type, ...], n: int, tag: str
) -> set[int]:
    """``n`` photos (each with a comment) of the moving range, through the session of
    ``models``' map; their ids."""
    photo_model, comment_model, _ = models
    made: set[int] = set()
    with sharded_session(engines) as session:
        for owner in range(1, 100 * n):  # bounded: a quarter of the owners are in range
            photo = photo_model(owner_id=owner * 7919, caption=f"{tag}{owner}")
            session.add(photo)
            session.flush()
            if not LOW <= PHOTO_LAYOUT.field_of(photo.id, "shard") < HIGH:
                session.delete(photo)
                session.flush()
                continue
            session.add(comment_model(photo_id=photo.id, text=f"{tag}{owner}"))
            made.add(photo.id)
            if len(made) == n:
                break
        session.commit()
    assert len(made) == n
    return made


def on(engine: Engine, models: tuple[type, ...]) -> dict[str, dict[Any, tuple[Any, ...]]]:
    found = {}
    with engine.connect() as connection:
        for model in models:
            table = model.__table__  # type: ignore[attr-defined]
            found[table.name] = {r[0]: tuple(r) for r in connection.execute(select(table))}
    return found


def test_a_copy_under_the_old_map_refuses_to_delete_what_the_new_map_wrote(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    state = tmp_path / "move.json"
    old_shards = {k: engines[k] for k in BEFORE}

    def mover() -> Any:
        session = sharded_session(old_shards)
        return shard_move(
            session, Old[:2], source="shard_1", target="shard_2", engines=engines,
            low=LOW, high=HIGH, state=state, margin_ms=0,
        )  # fmt: skip

    photos_in_range(old_shards, Old, 6, "seed")
    mover().copy()
    time.sleep(0.005)  # ids made from now on carry a later time than the copy's end
    written = photos_in_range(engines, New, 4, "new")  # part of the fleet on the new map
    target = on(engines["shard_2"], Old[:2])
    assert written <= set(target["mv_photos"])

    with pytest.raises(TargetWritten, match="mv_photos: shard_2 holds 4 rows") as refused:
        mover().copy()  # the operator, still on the old map: before, it deleted them
    assert "--abort --copy-back" in str(refused.value)
    move = mover()
    with pytest.raises(TargetWritten):
        move.switch()
    assert move.fence.installed() == []  # refused: the source takes writes again
    assert on(engines["shard_2"], Old[:2]) == target  # nothing deleted

    move.abort(copy_back=True)  # the way back: every row on the source, once
    source = on(engines["shard_1"], Old[:2])
    assert on(engines["shard_2"], Old[:2]) == {"mv_photos": {}, "mv_comments": {}}
    for table, rows in target.items():
        for key, row in rows.items():
            assert source[table][key] == row
    assert written <= set(source["mv_photos"])
