"""``ShardMove.switch()`` under SQLAlchemy: the moving range closed on the source, live.

The split of test_move_shards (``shard_1``'s logical shards 6144..8191 go to
``shard_2``) with a writer that inserts, updates and deletes through the session of the
day: behind the fence its writes of the range fail with ``ShardMoveFencedError``
(flush, ``session.execute``, Core on the engine), every other write goes on (the rest
of ``shard_1``'s photos too), and the copy behind the fence is exact.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from uid_fields import ShardMoveFencedError
from uid_fields.sqlalchemy import audit, shard_move, sharded_session

from .models import PHOTO_LAYOUT
from .test_move_shards import AFTER, BEFORE, New, Old, rows, write


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def engines(request: pytest.FixtureRequest) -> Iterator[dict[str, Engine]]:
    every: dict[str, Engine] = request.getfixturevalue(
        "postgres_engines" if request.param == "postgresql" else f"{request.param}_engines"
    )
    three = {name: every[name] for name in ("shard_0", "shard_1", "shard_2")}
    metadata = Old[0].metadata
    for engine in three.values():
        metadata.drop_all(engine)
        metadata.create_all(engine)
    yield three
    for engine in three.values():
        metadata.drop_all(engine)


def the_move(engines: dict[str, Engine], session: Any, **options: Any) -> Any:
    return shard_move(
        session,
        Old,
        source="shard_1",
        target="shard_2",
        engines={"shard_2": engines["shard_2"]},
        low=6144,
        high=8192,
        batch=20,
        **options,
    )


class Writer(threading.Thread):
    """Inserts, updates and deletes photos through the old map; counts refusals."""

    def __init__(self, shards: dict[str, Engine]) -> None:
        super().__init__(daemon=True)
        self.shards, self.stop = shards, threading.Event()
        self.rounds, self.fenced = 0, 0
        self.error: BaseException | None = None
        self.random = random.Random(28)

    def run(self) -> None:
        try:
            self.write()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def write(self) -> None:
        while not self.stop.is_set() and self.rounds < 300:
            try:
                self.one_round()
            except OperationalError as exc:  # MariaDB's deadlocks: retried, as an app does
                if "Deadlock" not in str(exc):
                    raise
                self.rounds += 1

    def one_round(self) -> None:
        Photo, pick = Old[0], self.random
        with sharded_session(self.shards) as session:
            try:
                session.add(Photo(owner_id=pick.randrange(1 << 20), caption="w"))
                session.commit()
            except ShardMoveFencedError:
                session.rollback()
                self.fenced += 1
            shard = pick.choice(sorted(self.shards))
            mine = or_(Photo.caption == "w", Photo.caption.like("u%"))  # no comments
            ids = session.execute(
                select(Photo.id).where(mine).limit(30), bind_arguments={"shard_id": shard}
            ).scalars()
            chosen = pick.choice(list(ids) or [None])
            if chosen is not None:
                try:
                    photo = session.get(Photo, chosen)
                    if photo is not None:
                        if self.rounds % 2:
                            photo.caption = f"u{self.rounds}"
                        else:
                            session.delete(photo)
                    session.commit()
                except ShardMoveFencedError:
                    session.rollback()
                    self.fenced += 1
        self.rounds += 1


def photo_in(low: int, high: int, caption: str) -> Any:
    """A new photo (its id is made when its owner is set) in logical shards low..high-1."""
    for owner in range(10_000):
        photo = Old[0](owner_id=owner, caption=caption)
        if low <= PHOTO_LAYOUT.field_of(photo.id, "shard") < high:
            return photo
    raise AssertionError("no owner found")


def in_range(move: Any, found: dict[str, dict[Any, Any]]) -> dict[str, dict[Any, Any]]:
    """The rows of ``found`` in the moving logical shards, by table."""
    kept: dict[str, dict[Any, Any]] = {}
    for table in move.tables:
        label, at = table.store.label, table.store.route_index
        kept[label] = {
            k: v
            for k, v in found[label].items()
            if 6144 <= table.placement.logical_shard_of(v[at]) < 8192
        }
    return kept


def wait_for(writer: Writer, rounds: int) -> None:
    start = writer.rounds
    while writer.rounds < start + rounds and writer.is_alive():
        threading.Event().wait(0.01)


def test_the_switch_closes_only_the_moving_range_and_the_copy_is_exact(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    old_shards = {k: engines[k] for k in BEFORE}
    Photo, Comment, Event = Old
    write(old_shards, Old, 30, "a")
    writer = Writer(old_shards)
    writer.start()
    try:
        wait_for(writer, 3)
        with sharded_session(old_shards) as session:
            move = the_move(engines, session, state=tmp_path / "move.json")
            move.copy()
            _copied, checked = move.switch()
            assert all(check.ok for check in checked), checked
            assert move.state.switched and move.fence.closed
            moving = in_range(move, rows({"shard_1": engines["shard_1"]}, Old))
            assert moving == in_range(move, rows({"shard_2": engines["shard_2"]}, Old))
            wait_for(writer, 20)
            assert writer.error is None and writer.fenced > 0

            # the range's rows: refused on every path, with the move and the range named
            with pytest.raises(ShardMoveFencedError) as caught:
                fenced = photo_in(6144, 8192, "in the range")
                session.add(fenced)
                session.commit()
            session.rollback()
            error = caught.value
            assert (error.table, error.low, error.high) == ("mv_photos", 6144, 8192)
            assert error.move == "shard_1->shard_2 6144:8192" and error.retryable
            one = min(moving["mv_photos"])  # one row: no lock waits on the writer's rows
            with pytest.raises(ShardMoveFencedError):
                session.execute(
                    update(Photo).where(Photo.id == one).values(caption="x"),
                    bind_arguments={"shard_id": "shard_1"},
                )
            session.rollback()
            with pytest.raises(ShardMoveFencedError), engines["shard_1"].begin() as connection:
                connection.execute(delete(Photo.__table__).where(Photo.id == one))  # type: ignore[attr-defined]
            with pytest.raises(ShardMoveFencedError) as whole:
                session.add(Event(name="mixed modulo"))
                for _ in range(40):  # until one lands on the source
                    session.add(Event(name="mixed modulo"))
                session.commit()
            session.rollback()
            assert whole.value.table == "mv_events" and whole.value.low is None

            # shard_1 keeps the rest of its range: writes there go on
            kept = photo_in(4096, 6144, "stays on shard_1")
            session.add(kept)
            session.flush()
            session.add(Comment(photo_id=kept.id, text="so does its comment"))
            session.commit()
            assert session.get(Photo, kept.id) is not None

            wait_for(writer, 10)
            assert in_range(move, rows({"shard_1": engines["shard_1"]}, Old)) == moving
            assert rows({"shard_1": engines["shard_1"]}, Old)["mv_photos"][kept.id]
    finally:
        writer.stop.set()
        writer.join(60)
    assert writer.error is None

    with sharded_session(engines) as session:  # the new map is deployed
        after = shard_move(
            session, New, source="shard_1", target="shard_2", low=6144, high=8192, batch=20
        )
        assert after.fence.closed
        source = rows({"shard_1": engines["shard_1"]}, New)
        cleaned = after.cleanup()
        assert not any(r.kept for r in cleaned)
        assert after.fence.installed() == []
        for model in New:
            assert sum(r.misplaced for r in audit(session, model)) == 0
        assert in_range(after, source) == moving  # nothing got in while fenced
        assert rows({"shard_2": engines["shard_2"]}, New) == moving  # the exact copy
    write(engines, New, 5, "new")
    assert set(AFTER) == set(engines)
