"""The portable mover under SQLAlchemy is exact, deletes after the switch included.

A writer inserts, updates and deletes photos and events through the session of the day
(the old map, then the new one) during the copy, behind the fence and after the deploy;
the mover copies, switches, runs again after the deploy and cleans up. Then every row
the application last wrote is on the databases as it wrote it: 0 lost, 0 stale, 0
resurrected, 0 doubled, and the audit finds no row off its shard. A second test kills
the mover (a separate process) with SIGKILL during the switch and during the cleanup.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from uid_fields import ShardMoveFencedError
from uid_fields.sqlalchemy import audit, shard_move, sharded_session

from .test_move_fence import engines  # noqa: F401  (the fixture: three backends)
from .test_move_shards import BEFORE, New, Old, rows, write

ROOT = Path(__file__).resolve().parents[2]
LOW, HIGH = 6144, 8192


class Ledger(threading.Thread):
    """Writes through the map of the day; ``rows`` is what the application last wrote
    of each row it touched ((table, id) -> row, None: deleted)."""

    def __init__(self, every: dict[str, Engine]) -> None:
        super().__init__(daemon=True)
        self.every = every
        #: The map of the day and its shards, swapped at once by ``deploy()``.
        self.day: tuple[tuple[type, ...], dict[str, Engine]] = (
            Old,
            {k: every[k] for k in BEFORE},
        )
        self.rows: dict[tuple[str, Any], tuple[Any, ...] | None] = {}
        for table, found in rows(self.day[1], Old).items():
            if table != "mv_comments":
                for key, row in found.items():
                    self.rows[table, key] = row
        self.mine: set[tuple[str, Any]] = set()
        self.stop = threading.Event()
        self.rounds = self.fenced = self.deletes = 0
        self.error: BaseException | None = None
        self.random = random.Random(28)
        self.born: dict[tuple[str, Any], int] = {}  # inserted at round n
        self.deleted: list[tuple[str, tuple[str, Any]]] = []  # (shard, row)

    def deleted_on(self, shard: str, born_before: int) -> bool:
        """Whether a row that existed before round ``born_before`` was deleted on
        ``shard`` (the writes are random: the test waits for one, by count)."""
        return any(
            where == shard and self.born.get(key, -1) < born_before
            for where, key in list(self.deleted)
        )

    def deploy(self) -> None:
        self.day = (New, dict(self.every))

    def one_write(self) -> None:
        models, shards = self.day
        Photo, _Comment, Event = models
        pick, n = self.random, self.rounds
        kind = pick.choice(["insert", "update", "update", "delete"])
        live = [
            k
            for k, v in self.rows.items()
            if v is not None and (kind != "delete" or k[0] == "mv_events" or k in self.mine)
        ]
        with sharded_session(shards) as session:
            if kind == "insert" or not live:
                made = (
                    Photo(owner_id=pick.randrange(1 << 20), caption=f"i{n}")
                    if n % 2
                    else Event(name=f"i{n}")
                )
                session.add(made)
                session.commit()
                key = (made.__tablename__, made.id)
                self.rows[key] = self.read(session, models, *key)
                self.born[key] = n
                self.mine.add(key)  # a photo of its own has no comments: deletable
                return
            table, pk = pick.choice(live)
            model = Photo if table == "mv_photos" else Event
            row = session.get(model, pk)
            assert row is not None, f"{table} {pk} lost"
            if kind == "update":
                if model is Photo:
                    row.caption = f"u{n}"
                else:
                    row.name = f"u{n}"
                session.commit()
                self.rows[table, pk] = self.read(session, models, table, pk)
            else:
                shard = str(inspect(row).identity_token)
                session.delete(row)
                session.commit()
                self.rows[table, pk] = None
                self.deleted.append((shard, (table, pk)))
                self.deletes += 1

    def read(self, session: Any, models: Any, table: str, pk: Any) -> tuple[Any, ...]:
        model = models[0] if table == "mv_photos" else models[2]
        found = session.get(model, pk, populate_existing=True)
        columns = model.__table__.columns  # type: ignore[attr-defined]
        return tuple(getattr(found, c.key) for c in columns)

    def run(self) -> None:
        try:
            while not self.stop.is_set() and self.rounds < 3000:
                try:
                    self.one_write()
                except ShardMoveFencedError:
                    self.fenced += 1  # retried later, as an application does
                except OperationalError as exc:  # deadlocks, SQLite's busy file: retried
                    if "Deadlock" not in str(exc) and "database is locked" not in str(exc):
                        raise
                self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc

    def wait(self, rounds: int) -> None:
        start = self.rounds
        while self.rounds < start + rounds and self.is_alive():
            threading.Event().wait(0.005)

    def compare(self) -> tuple[int, int, int, int]:
        """(lost, stale, resurrected, unknown) over every database; ``rows()`` fails on
        an id stored twice (doubled)."""
        stored = {
            (table, key): row
            for table, found in rows(self.every, New).items()
            if table != "mv_comments"
            for key, row in found.items()
        }
        wanted = {k: v for k, v in self.rows.items() if v is not None}
        gone = {k for k, v in self.rows.items() if v is None}
        lost = wanted.keys() - stored.keys()
        stale = {k for k in wanted.keys() & stored.keys() if wanted[k] != stored[k]}
        return (
            len(lost),
            len(stale),
            len(gone & stored.keys()),
            len(stored.keys() - self.rows.keys()),
        )


def old_move(every: dict[str, Engine], state: Path | None, **options: Any) -> Any:
    with sharded_session({k: every[k] for k in BEFORE}) as session:
        return shard_move(
            session,
            Old,
            source="shard_1",
            target="shard_2",
            engines={"shard_2": every["shard_2"]},
            low=LOW,
            high=HIGH,
            batch=7,
            state=state,
            **options,
        )


def new_move(every: dict[str, Engine], state: Path | None, **options: Any) -> Any:
    with sharded_session(every) as session:
        return shard_move(
            session,
            New,
            source="shard_1",
            target="shard_2",
            low=LOW,
            high=HIGH,
            batch=7,
            state=state,
            **options,
        )


def no_row_off_its_shard(every: dict[str, Engine]) -> bool:
    with sharded_session(every) as session:
        return all(sum(r.misplaced for r in audit(session, model)) == 0 for model in New)


@pytest.fixture
def ledger(engines: dict[str, Engine]) -> Iterator[Ledger]:  # noqa: F811
    write({k: engines[k] for k in BEFORE}, Old, 30, "a")
    thread = Ledger(engines)
    yield thread
    thread.stop.set()
    if thread.is_alive():
        thread.join(60)
    new_move(engines, None).fence.remove()  # drop_all deletes


def test_every_row_is_as_last_written_after_a_move_with_deletes_after_the_switch(
    engines: dict[str, Engine],  # noqa: F811
    ledger: Ledger,
    tmp_path: Path,
) -> None:
    state = tmp_path / "move.json"
    ledger.start()
    ledger.wait(10)
    old_move(engines, state).copy()
    _copied, checked = old_move(engines, state).switch()
    assert all(check.ok for check in checked)
    ledger.wait(20)
    deployed_at = ledger.rounds
    ledger.deploy()
    for _ in range(100):  # until a row of the range is deleted on the new owner
        ledger.wait(20)
        if ledger.deleted_on("shard_2", deployed_at):
            break
    assert ledger.deleted_on("shard_2", deployed_at), ledger.error
    second = new_move(engines, state)
    assert second.copy() == []
    reports = second.verify()
    assert all(r.ok for r in reports) and sum(r.deleted_since for r in reports) > 0
    ledger.wait(20)
    cleaned = new_move(engines, state).cleanup()
    assert not any(r.kept for r in cleaned)
    ledger.wait(20)
    ledger.stop.set()
    ledger.join(60)
    assert ledger.error is None and ledger.fenced > 0
    assert ledger.compare() == (0, 0, 0, 0)
    assert no_row_off_its_shard(engines)
    on_source = rows({"shard_1": engines["shard_1"]}, New)
    assert not any(
        LOW <= t.placement.logical_shard_of(row[t.store.route_index]) < HIGH
        for t in second.tables
        for row in on_source[t.store.label].values()
    )


CHILD = """
import sys, time
from pathlib import Path
from sqlalchemy import create_engine, inspect
from tests.sqlalchemy.test_move_exact import new_move, old_move
from uid_fields.sqlalchemy.moves import TableRows
folder, state, step = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
every = {n: create_engine(f"sqlite:///{folder}/{n}.db") for n in ("shard_0", "shard_1", "shard_2")}
read = TableRows.read
def slow_read(self, *args, **kwargs):  # a long move, in a few hundred ms
    time.sleep(0.01)
    return read(self, *args, **kwargs)
TableRows.read = slow_read
def under_way(progress):
    print("UNDER WAY", flush=True)
slow = {"on_progress": under_way}
if step == "switch":
    print(all(c.ok for c in old_move(every, state, **slow).switch()[1]))
else:
    print(not any(r.kept for r in new_move(every, state, **slow).cleanup()))
"""


@pytest.mark.stress
def test_kill_9_of_the_mover_during_the_switch_and_the_cleanup(tmp_path: Path) -> None:
    folder = tmp_path / "dbs"
    folder.mkdir()
    every = {
        n: create_engine(f"sqlite:///{folder / n}.db") for n in ("shard_0", "shard_1", "shard_2")
    }
    for engine in every.values():
        Old[0].metadata.create_all(engine)
    write({k: every[k] for k in BEFORE}, Old, 60, "k")
    state = tmp_path / "move.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    killed: list[str] = []

    def child(step: str, kill_after: float | None) -> str:
        command = [sys.executable, "-c", CHILD, str(folder), str(state), step]
        run = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        if kill_after is not None:
            assert run.stdout is not None
            run.stdout.readline()  # the pass is under way
            time.sleep(kill_after)
            if run.poll() is None:
                os.kill(run.pid, signal.SIGKILL)
                killed.append(step)
        out, err = run.communicate(timeout=120)
        return out + err[-3000:]

    ledger = Ledger(every)
    ledger.start()
    try:
        ledger.wait(10)
        old_move(every, state).copy()
        kills = [child("switch", delay) for delay in (0.05, 0.2)]
        assert "True" in child("switch", None), kills  # resumed to an exact switch
        ledger.wait(10)
        ledger.deploy()
        ledger.wait(40)  # deletes on the new owner, after the switch
        for delay in (0.05, 0.15):
            child("cleanup", delay)
            ledger.wait(5)
        assert "True" in child("cleanup", None)
        ledger.wait(10)
    finally:
        ledger.stop.set()
        ledger.join(60)
    assert ledger.error is None
    assert "switch" in killed and "cleanup" in killed  # killed in the middle of both
    assert ledger.compare() == (0, 0, 0, 0)
    assert no_row_off_its_shard(every)
    assert new_move(every, None).fence.installed() == []
    for engine in every.values():
        engine.dispose()
