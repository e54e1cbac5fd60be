"""A move's state file knows what it belongs to: other databases with the same names,
a rebuilt table or a finished move are refused, not resumed; a kill -9 at any point
leaves a state a later run resumes from.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from uid_fields.ops.moves import MoveStateMismatch, database_identity
from uid_fields.sqlalchemy import shard_move, sharded_session

from .test_move_fence import engines  # noqa: F401  (the fixture: three backends)
from .test_move_shards import BEFORE, New, Old, rows, write

ROOT = Path(__file__).resolve().parents[2]


def sqlite_set(folder: Path) -> dict[str, Engine]:
    folder.mkdir()
    made = {n: create_engine(f"sqlite:///{folder / n}.db") for n in ("shard_0", "shard_1")}
    made["shard_2"] = create_engine(f"sqlite:///{folder / 'shard_2'}.db")
    for engine in made.values():
        Old[0].metadata.create_all(engine)
    return made


@pytest.fixture
def two_sets(tmp_path: Path) -> Iterator[tuple[dict[str, Engine], dict[str, Engine]]]:
    """The same names on other databases: files in another folder."""
    first, second = sqlite_set(tmp_path / "monday"), sqlite_set(tmp_path / "friday")
    yield first, second
    for engine in [*first.values(), *second.values()]:
        engine.dispose()


def the_move(every: dict[str, Engine], state: Path, **options: Any) -> Any:
    with sharded_session({k: every[k] for k in BEFORE}) as session:
        return shard_move(
            session,
            Old,
            source="shard_1",
            target="shard_2",
            engines={"shard_2": every["shard_2"]},
            low=6144,
            high=8192,
            batch=5,
            state=state,
            **options,
        )


def stop_after_a_batch(progress: Any) -> None:
    if progress.phase == "copy" and progress.done:
        raise KeyboardInterrupt  # as if the operator pressed Ctrl-C


def test_a_state_file_of_other_databases_with_the_same_names_is_refused(
    two_sets: tuple[dict[str, Engine], dict[str, Engine]], tmp_path: Path
) -> None:
    monday, friday = two_sets
    for every in two_sets:
        write({k: every[k] for k in BEFORE}, Old, 40, "s")
    state = tmp_path / "move.json"
    with pytest.raises(KeyboardInterrupt):
        the_move(monday, state, on_progress=stop_after_a_batch).copy()
    left = json.loads(state.read_text())
    assert left["cursors"] and left["started_ms"]

    with pytest.raises(MoveStateMismatch) as refused:
        the_move(friday, state)
    said = str(refused.value)
    assert str(state) in said and "delete the file" in said and "another move" in said
    assert "monday" in said and "friday" in said  # which databases, then and now
    assert json.loads(state.read_text()) == left  # untouched

    elsewhere = tmp_path / "friday.json"
    friday_move = the_move(friday, elsewhere)
    friday_move.copy()
    assert all(check.ok for check in friday_move.verify())
    resumed = the_move(monday, state)  # monday's own file still resumes
    assert resumed.state.cursors == {k: v for k, v in left["cursors"].items()}
    resumed.copy()
    assert all(check.ok for check in resumed.verify())


def test_the_identity_of_each_backend_tells_its_databases_apart(
    engines: dict[str, Engine],  # noqa: F811
) -> None:
    move = the_move(engines, None)  # type: ignore[arg-type]
    store = move.tables[0].store
    seen = [database_identity(store, name) for name in ("shard_0", "shard_1", "shard_2")]
    assert len({json.dumps(s, sort_keys=True) for s in seen}) == 3
    assert database_identity(store, "shard_1") == seen[1]  # stable
    values = seen[1].get("values") or [seen[1]["file"]]
    assert all(v for v in values)


def test_a_rebuilt_source_or_a_finished_move_is_refused(
    engines: dict[str, Engine],  # noqa: F811
    tmp_path: Path,
) -> None:
    state = tmp_path / "move.json"
    write({k: engines[k] for k in BEFORE}, Old, 20, "f")
    the_move(engines, state).copy()
    if engines["shard_1"].dialect.name != "sqlite":  # SQLite: the file is the identity
        metadata = Old[0].metadata
        metadata.drop_all(engines["shard_1"])
        if engines["shard_1"].dialect.name != "postgresql":
            time.sleep(1.1)  # MariaDB keeps a table's creation time to the second
        metadata.create_all(engines["shard_1"])
        with pytest.raises(MoveStateMismatch, match="another move"):
            the_move(engines, state)
        state.unlink()
        write({k: engines[k] for k in BEFORE}, Old, 20, "g")
        for table in reversed(metadata.sorted_tables):  # the target starts empty again
            with engines["shard_2"].begin() as connection:
                connection.execute(table.delete())
        the_move(engines, state).copy()
    move = the_move(engines, state)
    move.switch()
    with sharded_session(engines) as session:  # deployed
        after = shard_move(
            session, New, source="shard_1", target="shard_2", low=6144, high=8192, state=state
        )
        assert not any(r.kept for r in after.cleanup())
        assert json.loads(state.read_text())["finished_ms"]
        finished = shard_move(
            session, New, source="shard_1", target="shard_2", low=6144, high=8192, state=state
        )
        assert not any(r.deleted or r.kept for r in finished.cleanup())  # again: nothing
        with pytest.raises(MoveStateMismatch, match="finished at"):
            finished.copy()


CHILD = """
import sys, time
from sqlalchemy import create_engine
from tests.sqlalchemy.test_move_shards import BEFORE, Old
from uid_fields.sqlalchemy import shard_move, sharded_session
folder, state = sys.argv[1], sys.argv[2]
every = {n: create_engine(f"sqlite:///{folder}/{n}.db") for n in ("shard_0", "shard_1", "shard_2")}
from uid_fields.sqlalchemy.moves import TableRows
read = TableRows.read
def slow_read(self, *args, **kwargs):  # a long copy, in a few hundred ms
    time.sleep(0.01)
    return read(self, *args, **kwargs)
TableRows.read = slow_read
with sharded_session({k: every[k] for k in BEFORE}) as session:
    move = shard_move(session, Old, source="shard_1", target="shard_2",
                      engines={"shard_2": every["shard_2"]}, low=6144, high=8192, batch=3,
                      state=state, on_progress=lambda p: print("UNDER WAY", flush=True))
    move.copy()
    ok = all(check.ok for check in move.verify())
print("VERIFIED" if ok else "DIFFERS")
"""


@pytest.mark.stress
def test_kill_9_of_the_mover_at_random_points_then_a_run_resumes_to_an_exact_copy(
    tmp_path: Path,
) -> None:
    every = sqlite_set(tmp_path / "dbs")
    write({k: every[k] for k in BEFORE}, Old, 150, "k")
    state = tmp_path / "move.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", CHILD, str(tmp_path / "dbs"), str(state)]
    kills = 0
    for delay in (0.02, 0.1, 0.25):  # inside the copy
        child = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        child.stdout.readline()  # the copy is under way
        time.sleep(delay)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            kills += 1
        child.wait(60)
        if state.exists():
            json.loads(state.read_text())  # never half a state
    assert kills >= 2  # the copy is long enough for most kills to land inside it
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "VERIFIED" in done.stdout, done.stderr
    source, target = (rows({k: every[k]}, Old) for k in ("shard_1", "shard_2"))
    moving = the_move(every, None)  # type: ignore[arg-type]
    for table in moving.tables:
        label, at = table.store.label, table.store.route_index
        wanted = {
            k: v
            for k, v in source[label].items()
            if 6144 <= table.placement.logical_shard_of(v[at]) < 8192
        }
        assert wanted and target[label] == wanted  # 0 lost, 0 doubled, 0 stale
    for engine in every.values():
        engine.dispose()
