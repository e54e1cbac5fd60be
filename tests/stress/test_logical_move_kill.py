"""A move by logical replication while the application writes, with the mover killed.

Two throwaway clusters: the source ``a`` (``wal_level=logical``) owns every logical
shard of the photos and their comments; the target ``b`` gets 6144..8191. A writer
thread inserts, updates and deletes photos and comments of the moving range (and a few
outside it) all along, through the session of the day. The mover runs as a process:

1. the first run is killed with SIGKILL in the middle of the initial copy (the target
   holds the comments' table in SHARE mode, so their copy cannot finish before);
2. a second run resumes with the publication, slot and subscription it finds, waits for
   the copy and the catch-up, fences the range on the source, compares and switches;
3. a write of the range on the old map is then refused (``ShardMoveFencedError``); the
   new map is "deployed" (the writer's session now names ``b``) and the writer, which
   retries refused writes after the deploy, goes on, deletes included;
4. the portable cleanup deletes the source's rows of the range and removes the fence.

Then every row the application last wrote is compared with what its owner holds
(content, not presence): nothing lost, stale, resurrected or doubled; and neither
cluster keeps a publication, subscription or replication slot. Runs once, on the
SQLite pass of the suite (it makes its own clusters).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from tests.postgres_servers import PostgresCluster, postgres_cluster
from tests.sqlalchemy.models import PHOTO_LAYOUT
from tests.stress.logical_move_app import HIGH, LOW, New, Old, sqlalchemy_url
from uid_fields.errors import ShardMoveFencedError
from uid_fields.ops.replication import ReplicationUnavailable
from uid_fields.sqlalchemy import logical_shard_move, sharded_session
from uid_fields.sqlalchemy.fields import field_config

ROOT = Path(__file__).resolve().parents[2]
Photos = dict[int, tuple[Any, ...] | None]
PLACEMENT = field_config(Old[0].__table__.c.id).placement_for()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[PostgresCluster, PostgresCluster]]:
    with postgres_cluster("wal_level=logical") as source, postgres_cluster() as target:
        yield source, target


@pytest.fixture
def engines(clusters: tuple[PostgresCluster, PostgresCluster]) -> Iterator[dict[str, Engine]]:
    made = {}
    for name, cluster in zip("ab", clusters, strict=True):
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS app_{name}")
        made[name] = create_engine(sqlalchemy_url(cluster.create_database(f"app_{name}")))
        Old[0].metadata.create_all(made[name])
    yield made
    for engine in made.values():
        engine.dispose()


def logical_of(photo_id: int) -> int:
    """The logical shard in a photo id (Instagram ids: the shard field)."""
    shift, bits = PHOTO_LAYOUT.field_shift("shard"), PHOTO_LAYOUT.field_bits("shard")
    return (photo_id >> shift) % (1 << bits)


class Writer(threading.Thread):
    """Writes photos and comments; remembers what it last wrote (None: deleted)."""

    def __init__(self, engines: dict[str, Engine], seed: int) -> None:
        super().__init__(daemon=True)
        self.engines = engines
        self.random = random.Random(seed)
        self.photos: Photos = {}
        self.comments: Photos = {}
        self.deployed = threading.Event()
        self.stop = threading.Event()
        self.fenced = 0
        self.deadlocks = 0
        self.ops = 0
        self.errors: list[BaseException] = []

    def session(self) -> Any:
        if self.deployed.is_set():
            return New, sharded_session(self.engines)
        return Old, sharded_session({"a": self.engines["a"]})

    def owner(self, inside: bool | None = None) -> int:
        """An owner id whose photos land in the moving range (nine in ten) or below."""
        if inside is None:
            inside = self.random.random() < 0.9
        while True:
            owner = self.random.randrange(1, 1 << 40)
            if (LOW <= PLACEMENT.logical_shard_for_key(owner) < HIGH) == inside:
                return owner

    def one(self) -> None:
        (Photo, Comment), session = self.session()
        live = [k for k, v in self.photos.items() if v is not None]
        kind = self.random.choice(["insert", "insert", "update", "update", "delete"])
        with session:
            if kind == "insert" or not live:
                photo = Photo(owner_id=self.owner(), caption=f"p{self.ops}")
                session.add(photo)
                session.flush()
                comment = Comment(photo_id=photo.id, text=f"c{self.ops}")
                session.add(comment)
                session.commit()
                self.photos[photo.id] = (photo.id, photo.owner_id, photo.caption)
                self.comments[comment.id] = (comment.id, comment.photo_id, comment.text)
            elif kind == "update":
                photo = session.get(Photo, self.random.choice(live))
                photo.caption = f"u{self.ops}"
                comment = session.scalars(
                    select(Comment).where(Comment.photo_id == photo.id).limit(1)
                ).first()
                if comment is not None:
                    comment.text = f"u{self.ops}"
                session.commit()
                self.photos[photo.id] = (photo.id, photo.owner_id, photo.caption)
                if comment is not None:
                    self.comments[comment.id] = (comment.id, comment.photo_id, comment.text)
            else:
                key = self.random.choice(live)
                mine = session.scalars(select(Comment).where(Comment.photo_id == key)).all()
                for comment in mine:
                    session.delete(comment)
                session.flush()
                session.delete(session.get(Photo, key))
                session.commit()
                self.photos[key] = None
                for comment in mine:
                    self.comments[comment.id] = None
        self.ops += 1

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    self.one()
                except ShardMoveFencedError:
                    self.fenced += 1  # nothing was written: retry once deployed
                    self.deployed.wait(60)
                except OperationalError as exc:
                    # The fence's triggers are created table after table while this
                    # transaction writes them in another order: PostgreSQL cancels one
                    # of the two, and an application retries (nothing was written).
                    if "deadlock detected" not in str(exc):
                        raise
                    self.deadlocks += 1
                time.sleep(0.002)
        except BaseException as exc:
            self.errors.append(exc)


def mover(source: str, target: str, state: Path, kill_at: str = "") -> subprocess.Popen[str]:
    module = "tests.stress.logical_move_app"
    return subprocess.Popen(
        [sys.executable, "-m", module, source, target, str(state), kill_at],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def replication_objects(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            (str(kind), str(name))
            for kind, name in conn.execute(
                "SELECT 'publication', pubname FROM pg_publication UNION ALL "
                "SELECT 'subscription', subname FROM pg_subscription UNION ALL "
                "SELECT 'slot', slot_name FROM pg_replication_slots"
            ).fetchall()
        ]


def stored(engines: dict[str, Engine]) -> dict[str, dict[str, dict[Any, tuple[Any, ...]]]]:
    """Per database and table, every row by id."""
    found: dict[str, dict[str, dict[Any, tuple[Any, ...]]]] = {}
    for name, engine in engines.items():
        with engine.connect() as connection:
            for model in New:
                table = model.__table__  # type: ignore[attr-defined]
                rows = connection.execute(select(table)).all()
                found.setdefault(name, {})[table.name] = {r[0]: tuple(r) for r in rows}
    return found


def wait_until(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def subscription_states(url: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return dict(
            conn.execute(
                "SELECT srrelid::regclass::text, srsubstate FROM pg_subscription_rel"
            ).fetchall()
        )


def test_a_move_by_replication_killed_mid_copy_resumes_and_switches_exactly(
    clusters: tuple[PostgresCluster, PostgresCluster], engines: dict[str, Engine], tmp_path: Path
) -> None:
    source_url = engines["a"].url.render_as_string(hide_password=False)
    target_url = engines["b"].url.render_as_string(hide_password=False)
    plain_target = target_url.replace("postgresql+psycopg:", "postgresql:")
    plain_source = source_url.replace("postgresql+psycopg:", "postgresql:")
    writer = Writer(engines, seed=28)
    for _ in range(150):
        writer.one()
    writer.start()
    state = tmp_path / "move.json"
    # The comments' copy cannot finish while the target holds their table in SHARE mode
    # (the copy writes with ROW EXCLUSIVE; reads go on): the kill lands mid-copy. (The
    # photos' copy may finish or not: its last step applies comments too, and waits.)
    blocker = psycopg.connect(plain_target)
    blocker.execute("LOCK TABLE lm_comments IN SHARE MODE")
    first = mover(source_url, target_url, state)
    try:
        wait_until(lambda: "lm_comments" in subscription_states(plain_target), "the subscription")
        time.sleep(0.3)  # the writer goes on meanwhile
        assert subscription_states(plain_target).get("lm_comments") not in ("f", "s", "r")
        assert first.poll() is None, first.stdout.read() if first.stdout else ""
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        blocker.rollback()
        blocker.close()
    assert first.returncode == -signal.SIGKILL
    assert "slot" in {kind for kind, _ in replication_objects(plain_source)}  # kept for the rerun

    second = mover(source_url, target_url, state)
    out, _ = second.communicate(timeout=120)
    assert second.returncode == 0, out
    assert "switched" in out and "rows" in out  # progress was shown
    deploy_write_clean_up_and_compare(writer, engines, state)


def test_a_move_killed_at_random_points_finishes_exactly(
    engines: dict[str, Engine], tmp_path: Path
) -> None:
    """The mover is killed (SIGKILL) at a random SQL statement of its run, again and
    again, then runs to the end; each run resumes what the last one left: a start, a
    copy, a catch-up, a fence installed, a switch half done."""
    source_url = engines["a"].url.render_as_string(hide_password=False)
    target_url = engines["b"].url.render_as_string(hide_password=False)
    writer = Writer(engines, seed=29)
    for _ in range(150):
        writer.one()
    writer.start()
    state = tmp_path / "move.json"
    chance = random.Random(2028)
    kills = 0
    # Every run sends at least 30 statements before it switches (checks, session
    # settings, identities, publication, slot, subscription, waits); the switch's are
    # named: the WAL position after the fence, the comparison, each drop, the restore.
    switching = [
        "pg_current_wal_lsn()::text",
        "SELECT attname FROM pg_attribute",
        "ALTER SUBSCRIPTION",
        "DROP SUBSCRIPTION+",
        "DROP PUBLICATION",
        "DROP PUBLICATION+",
        "REPLICA IDENTITY DEFAULT",
    ]
    points = [
        str(chance.randrange(1, 26)),  # checks, identities, publication, slot, subscription
        str(chance.randrange(1, 26)),
        str(chance.randrange(26, 33)),  # waiting for the copy or the catch-up
        *sorted(chance.sample(switching, 3), key=switching.index),
    ]
    for point in points:
        run = mover(source_url, target_url, state, kill_at=point)
        out, _ = run.communicate(timeout=120)
        if run.returncode == -signal.SIGKILL:
            print(out.strip().splitlines()[-1])  # where it died, shown if the test fails
            kills += 1
            continue
        assert run.returncode == 0, out
        break
    else:
        last = mover(source_url, target_url, state)
        out, _ = last.communicate(timeout=120)
        assert last.returncode == 0, out
    assert kills == len(points)
    deploy_write_clean_up_and_compare(writer, engines, state)


def deploy_write_clean_up_and_compare(
    writer: Writer, engines: dict[str, Engine], state: Path
) -> None:
    """After the switch: the range refuses writes on the old map; deploy (the writer
    turns to the new map and goes on, deletes included); clean up; then every row the
    writer last wrote is where its id says, as it was written, once."""
    source_url = engines["a"].url.render_as_string(hide_password=False)
    target_url = engines["b"].url.render_as_string(hide_password=False)
    plain_target = target_url.replace("postgresql+psycopg:", "postgresql:")
    plain_source = source_url.replace("postgresql+psycopg:", "postgresql:")
    assert replication_objects(plain_source) == []
    assert replication_objects(plain_target) == []

    # Fenced until the deploy: a write of the range on the old map is refused.
    with sharded_session({"a": engines["a"]}) as session, pytest.raises(ShardMoveFencedError):
        session.add(Old[0](owner_id=writer.owner(inside=True), caption="fenced"))
        session.commit()
    time.sleep(0.2)
    writer.deployed.set()
    wait_until(lambda: writer.ops > 0 and writer.fenced >= 0, "the writer")
    before = writer.ops
    wait_until(lambda: writer.errors or writer.ops >= before + 150, "writes on the new map")
    writer.stop.set()
    writer.join(60)
    assert not writer.errors, writer.errors

    with (
        sharded_session(engines) as session,
        logical_shard_move(
            session, New, source="a", target="b", low=LOW, high=HIGH, state=state
        ) as move,
    ):
        cleanup = move.cleanup(batch=50)
        assert sum(r.deleted for r in cleanup) > 100 and not any(r.kept for r in cleanup)
    assert not state.exists()

    held = stored(engines)
    lost = stale = resurrected = doubled = misplaced = 0
    for table, expected in (("lm_photos", writer.photos), ("lm_comments", writer.comments)):
        for key, last in expected.items():
            found = [held[db][table][key] for db in "ab" if key in held[db][table]]
            doubled += len(found) > 1
            if last is None:
                resurrected += bool(found)
            elif not found:
                lost += 1
            else:
                stale += found[0] != last
                photo = last[0] if table == "lm_photos" else last[1]
                owner = "b" if LOW <= logical_of(photo) < HIGH else "a"
                misplaced += key not in held[owner][table]
        for db in "ab":
            resurrected += len(set(held[db][table]) - set(expected))
    assert (lost, stale, resurrected, doubled, misplaced) == (0, 0, 0, 0, 0)
    moved = [k for k, v in writer.photos.items() if v and LOW <= logical_of(k) < HIGH]
    assert len(moved) > 50 and writer.ops > 400
    assert replication_objects(plain_source) == [] and replication_objects(plain_target) == []
    with psycopg.connect(plain_source, autocommit=True) as conn:
        identities = dict(
            conn.execute(
                "SELECT relname, relreplident FROM pg_class WHERE relname LIKE 'lm_%' "
                "AND relkind = 'r'"
            ).fetchall()
        )
        triggers = conn.execute("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal")
        assert (triggers.fetchone() or [1])[0] == 0  # the fence is gone
    assert identities == {"lm_photos": "d", "lm_comments": "d"}  # restored


def test_a_source_without_wal_level_logical_is_refused_with_the_fix(
    engines: dict[str, Engine],
) -> None:
    """The target's cluster runs with the default ``wal_level = replica``: as a source
    it is refused before anything is created, and the message says how to fix it."""
    with (
        sharded_session({"a": engines["b"]}) as session,
        logical_shard_move(
            session, Old, source="a", target="b", engines={"b": engines["a"]}, low=LOW, high=HIGH
        ) as move,
        pytest.raises(ReplicationUnavailable) as refused,
    ):
        move.run()
    message = str(refused.value)
    assert "wal_level = replica" in message
    assert "ALTER SYSTEM SET wal_level = logical" in message and "restart" in message
    for engine in engines.values():
        url = engine.url.render_as_string(hide_password=False)
        assert replication_objects(url.replace("postgresql+psycopg:", "postgresql:")) == []


def test_a_target_user_that_is_not_a_superuser_is_refused(
    clusters: tuple[PostgresCluster, PostgresCluster], engines: dict[str, Engine]
) -> None:
    """PostgreSQL 15 lets only superusers create subscriptions: said before anything
    is created on either side."""
    with psycopg.connect(clusters[1].url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS mover")
        conn.execute("CREATE ROLE mover LOGIN")
    url = engines["b"].url.set(username="mover")
    plain = create_engine(url)
    try:
        with (
            sharded_session({"a": engines["a"]}) as session,
            logical_shard_move(
                session, Old, source="a", target="b", engines={"b": plain}, low=LOW, high=HIGH
            ) as move,
            pytest.raises(ReplicationUnavailable, match="not a superuser"),
        ):
            move.run()
    finally:
        plain.dispose()
    for engine in engines.values():
        url_text = engine.url.render_as_string(hide_password=False)
        assert replication_objects(url_text.replace("postgresql+psycopg:", "postgresql:")) == []
