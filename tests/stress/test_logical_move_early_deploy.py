"""A move by logical replication whose new map reached half the fleet before ``--switch``
(issue 35): ``--abort`` deleted 343 rows and 353 updates that processes on the new map
had written on the target and that existed nowhere else.

Two throwaway clusters, the application of ``logical_move_app`` (photos and their
comments; ``a`` owns every logical shard, the new map gives 6144..8191 to ``b``). The
move copies and streams; then processes on the new map insert photos and comments of the
range (they land on ``b``) and update copied photos there, while processes on the old
map go on writing the range on ``a``. A switch under the old map fails (the target
differs), and ``abort()`` must refuse, naming the tables and counts, and delete nothing.
Each recovery docs/scaling.md gives is then run to its end, and every row the
application wrote is present exactly once, as last written, on the database its map
gives it to:

- switch forward: the new map deployed everywhere, the switch run under it, cleanup;
- go back: the old map deployed everywhere, ``abort(copy_back=True)``.

Runs once, on the SQLite pass of the suite (it makes its own clusters).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.engine import Engine

from tests.postgres_servers import PostgresCluster, postgres_cluster
from tests.stress.logical_move_app import HIGH, LOW, New, Old, sqlalchemy_url
from uid_fields.ops.replication import LogicalMove, ReplicationError
from uid_fields.sqlalchemy import logical_shard_move, sharded_session
from uid_fields.sqlalchemy.fields import field_config

PLACEMENT = field_config(Old[0].__table__.c.id).placement_for()  # type: ignore[attr-defined]
#: What the application last wrote, by table and id.
Written = dict[str, dict[int, tuple[Any, ...]]]


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[PostgresCluster, PostgresCluster]]:
    with postgres_cluster("wal_level=logical") as source, postgres_cluster() as target:
        yield source, target


@pytest.fixture
def engines(clusters: tuple[PostgresCluster, PostgresCluster]) -> Iterator[dict[str, Engine]]:
    made = {}
    for name, cluster in zip("ab", clusters, strict=True):
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS early_{name} WITH (FORCE)")
        made[name] = create_engine(sqlalchemy_url(cluster.create_database(f"early_{name}")))
        Old[0].metadata.create_all(made[name])
    yield made
    for engine in made.values():
        engine.dispose()


def owner(rand: random.Random, inside: bool = True) -> int:
    while True:
        found = rand.randrange(1, 1 << 40)
        if (LOW <= PLACEMENT.logical_shard_for_key(found) < HIGH) == inside:
            return found


def write(
    session: Any,
    models: tuple[type, type],
    rand: random.Random,
    written: Written,
    *,
    inserts: int,
    updates: list[int],
    tag: str,
    inside: bool = True,
) -> list[int]:
    """Insert photos (each with a comment) and update the captions of ``updates``, as an
    application process would; remembers what it wrote. The new photos' ids."""
    photo_model, comment_model = models
    made = []
    for i in range(inserts):
        photo = photo_model(owner_id=owner(rand, inside), caption=f"{tag} p{i}")
        session.add(photo)
        session.flush()
        comment = comment_model(photo_id=photo.id, text=f"{tag} c{i}")
        session.add(comment)
        session.flush()
        written["lm_photos"][photo.id] = (photo.id, photo.owner_id, photo.caption)
        written["lm_comments"][comment.id] = (comment.id, comment.photo_id, comment.text)
        made.append(photo.id)
    for key in updates:
        photo = session.get(photo_model, key)
        photo.caption = f"{tag} u{key % 1000}"
        written["lm_photos"][key] = (photo.id, photo.owner_id, photo.caption)
    session.commit()
    return made


def stored(engines: dict[str, Engine]) -> dict[str, dict[str, dict[int, tuple[Any, ...]]]]:
    found: dict[str, dict[str, dict[int, tuple[Any, ...]]]] = {}
    for name, engine in engines.items():
        with engine.connect() as connection:
            for model in New:
                table = model.__table__  # type: ignore[attr-defined]
                rows = connection.execute(select(table)).all()
                found.setdefault(name, {})[table.name] = {r[0]: tuple(r) for r in rows}
    return found


def replication_objects(engine: Engine) -> list[tuple[str, str]]:
    with psycopg.connect(engine.url.render_as_string(False).replace("+psycopg", "")) as conn:
        return [
            (str(kind), str(name))
            for kind, name in conn.execute(
                "SELECT 'publication', pubname FROM pg_publication UNION ALL "
                "SELECT 'subscription', subname FROM pg_subscription UNION ALL "
                "SELECT 'slot', slot_name FROM pg_replication_slots UNION ALL "
                "SELECT 'trigger', tgname FROM pg_trigger WHERE NOT tgisinternal"
            ).fetchall()
        ]


def mover(engines: dict[str, Engine], state: Path, *, deployed: bool) -> LogicalMove:
    """The mover as the operator runs it: under the old map, or under the new one."""
    if deployed:
        session = sharded_session(engines)
        return logical_shard_move(
            session, New, source="a", target="b", low=LOW, high=HIGH, state=state,
            poll_s=0.05, timeout_s=60,
        )  # fmt: skip
    session = sharded_session({"a": engines["a"]})
    return logical_shard_move(
        session, Old, source="a", target="b", engines={"b": engines["b"]}, low=LOW,
        high=HIGH, state=state, poll_s=0.05, timeout_s=60,
    )  # fmt: skip


def early_deploy(engines: dict[str, Engine], state: Path) -> Written:
    """Seed, copy and stream; then the new map reaches half the fleet before the switch."""
    rand = random.Random(35)
    written: Written = {"lm_photos": {}, "lm_comments": {}}
    with sharded_session({"a": engines["a"]}) as old:
        seeded = write(old, Old, rand, written, inserts=30, updates=[], tag="seed")
        write(old, Old, rand, written, inserts=5, updates=[], tag="outside", inside=False)
    with mover(engines, state, deployed=False) as move:
        move.run(switch=False)  # copied, caught up, streaming
    with sharded_session(engines) as new:  # the half of the fleet on the new map
        write(new, New, rand, written, inserts=7, updates=seeded[:6], tag="new")
    with sharded_session({"a": engines["a"]}) as old:  # the other half, still on the old
        write(old, Old, rand, written, inserts=4, updates=seeded[10:14], tag="old")
    return written


def assert_each_once(engines: dict[str, Engine], written: Written) -> None:
    """Every row written is on exactly one database, as last written, on its owner."""
    found = stored(engines)
    for table, rows in written.items():
        for key, row in rows.items():
            where = [name for name in "ab" if key in found[name][table]]
            photo = key if table == "lm_photos" else row[1]
            logical = PLACEMENT.logical_shard_of(photo)
            owner_db = "b" if LOW <= logical < HIGH else "a"
            assert where == [owner_db], (table, key, where)
            assert found[owner_db][table][key] == row, (table, key)
        for name in "ab":
            assert set(found[name][table]) <= set(rows), (name, table)  # nothing extra


def test_abort_after_an_early_deploy_refuses_and_switching_forward_keeps_every_write(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    state = tmp_path / "move.json"
    written = early_deploy(engines, state)
    on_target = stored(engines)["b"]
    with mover(engines, state, deployed=False) as move:
        with pytest.raises(ReplicationError, match="differs"):
            move.switch()  # under the old map: the target differs, correctly refused
        with pytest.raises(ReplicationError) as refused:
            move.abort()
    said = str(refused.value)
    assert "only copy" in said and "nothing was deleted" in said, said
    assert "lm_photos: 7 rows only on the target, 6 rows changed there" in said, said
    assert "lm_comments: 7 rows only on the target, 0 rows changed there" in said, said
    assert "move-shards --switch" in said and "--copy-back" in said, said
    after = stored(engines)["b"]
    for table, rows in on_target.items():
        assert set(rows) <= set(after[table]), table  # nothing deleted
    assert ("subscription", move.name) in replication_objects(engines["b"])  # still streams
    # Switch forward: the new map everywhere, the switch run under it, then the cleanup.
    with mover(engines, state, deployed=True) as move:
        move.run(switch=True)
        assert move.switched
        move.cleanup()
    assert_each_once(engines, written)
    assert replication_objects(engines["a"]) == replication_objects(engines["b"]) == []


def test_going_back_after_an_early_deploy_copies_the_targets_writes_back_first(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    state = tmp_path / "move.json"
    written = early_deploy(engines, state)
    with (
        mover(engines, state, deployed=True) as move,
        pytest.raises(ReplicationError, match="deployed before --switch"),
    ):
        move.abort()  # under the new map: the target owns the range
    # Go back: the old map everywhere (nothing writes to b), copy back, then abort.
    with mover(engines, state, deployed=False) as move:
        with pytest.raises(ReplicationError, match="only copy"):
            move.abort()
        move.abort(copy_back=True)
    found = stored(engines)
    for table, rows in written.items():
        assert found["b"][table] == {}  # the target's copies are gone
        assert found["a"][table] == rows  # each row once, as last written, on the source
    assert replication_objects(engines["a"]) == replication_objects(engines["b"]) == []
