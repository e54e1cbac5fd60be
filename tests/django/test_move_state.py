"""``move-shards --state``: a file that belongs to other databases, or to a finished
move, is refused with what differs and what to do; the move's own file resumes."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.django.test_move_shards import SOURCE, TARGET, deployed, make_rows
from uid_fields.django.ops.moves import shard_move

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def move(*args: str) -> str:
    out = StringIO()
    call_command(
        "uid_fields",
        "move-shards",
        *("--map", "main", "--from", SOURCE, "--to", TARGET, "-v", "0"),
        *args,
        stdout=out,
    )
    return out.getvalue()


@pytest.fixture(autouse=True)
def no_fence_left() -> object:
    yield None
    shard_move("main", source=SOURCE, target=TARGET).fence.remove()  # the flush deletes


def test_a_state_left_by_a_move_of_other_databases_is_refused(tmp_path: Path) -> None:
    make_rows(4, "s")
    state = tmp_path / "move.json"
    move("--state", str(state))
    mine = json.loads(state.read_text())
    source = mine["belongs"]["source"]
    assert (
        source["vendor"] in ("sqlite", "postgresql", "mysql") and mine["belongs"]["map"] == "main"
    )
    assert set(mine["belongs"]["tables"]) >= {"testapp.Photo", "testapp.Customer"}

    other = json.loads(state.read_text())  # as a move of other databases left it
    if "values" in source:
        other["belongs"]["source"]["values"][0] = "another server"
    else:
        other["belongs"]["source"]["inode"] += 1
    other["started_ms"] = 1_600_000_000_000
    state.write_text(json.dumps(other))
    with pytest.raises(CommandError) as refused:
        move("--state", str(state))
    said = str(refused.value)
    assert str(state) in said and "another move begun at 2020-09-13" in said
    assert "source:" in said and "delete the file" in said
    assert json.loads(state.read_text()) == other  # untouched

    state.write_text(json.dumps(mine))
    move("--state", str(state))  # its own file resumes


def test_a_finished_move_marks_its_state_and_is_not_resumed(tmp_path: Path) -> None:
    make_rows(4, "f")
    state = str(tmp_path / "move.json")
    move("--state", state, "--switch")
    with deployed():
        cleaned = move("--state", state, "--cleanup")
        assert "kept" not in cleaned
        assert json.loads(Path(state).read_text())["finished_ms"]
        again = move("--state", state, "--cleanup")  # cleaning up again finds nothing
        assert "0 rows deleted" in again and "kept" not in again
        with pytest.raises(CommandError, match=r"finished at .*delete the file"):
            move("--state", state)  # a copy would start a new move from the old state
