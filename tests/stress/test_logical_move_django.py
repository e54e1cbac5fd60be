"""``manage.py uid_fields move-shards`` between PostgreSQL databases: by logical
replication (``--method auto`` picks it), through the Django command.

A project of its own (``tests/stress/logical_django``) puts the map ``pics`` on two
throwaway clusters. The first run starts the replication and is called off with
``--abort`` (nothing stays); a switch is called off with ``--unfence``; the next run
copies and catches up; rows of the range are then updated and deleted on the source,
and ``--switch`` fences the range and switches;
after the deploy (the project's settings with the new map), ``--cleanup`` deletes the
source's range. The target then holds exactly the source's rows of the range as they
were at the switch; nothing of the replication is left. Runs once, on the SQLite pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.postgres_servers import PostgresCluster, postgres_cluster
from uid_fields import INSTAGRAM

ROOT = Path(__file__).resolve().parents[2]
LOW, HIGH = 4096, 8192
SHIFT, BITS = INSTAGRAM.field_shift("shard"), INSTAGRAM.field_bits("shard")
IN_RANGE = f"((id >> {SHIFT}) % {1 << BITS}) >= {LOW}"
PIC_IN_RANGE = f"((pic_id >> {SHIFT}) % {1 << BITS}) >= {LOW}"
SEED = """
import random
import django
django.setup()
from tests.stress.logical_django.pics.models import Pic, PicNote
rand = random.Random(28)
for i in range(160):
    pic = Pic.objects.create(owner_id=rand.randrange(1, 1 << 40), caption=f"p{i}")
    PicNote.objects.create(pic=pic, text=f"n{i}")
"""


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[PostgresCluster, PostgresCluster]]:
    with postgres_cluster("wal_level=logical") as source, postgres_cluster() as target:
        source.create_database("pics_src")
        target.create_database("pics_dst")
        yield source, target


def django(clusters: tuple[PostgresCluster, PostgresCluster], *args: str, deployed: bool = False,
           code: str | None = None, tmp: Path, ok: bool = True) -> str:  # fmt: skip
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.stress.logical_django.settings",
        "LOGICAL_MOVE_SOURCE_PORT": str(clusters[0].port),
        "LOGICAL_MOVE_TARGET_PORT": str(clusters[1].port),
        "LOGICAL_MOVE_DEPLOYED": "1" if deployed else "0",
        "PYTHONPATH": str(ROOT),
    }
    command = ["-c", code] if code else ["-m", "django", *args]
    done = subprocess.run(
        [sys.executable, *command], cwd=tmp, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert (done.returncode == 0) == ok, done.stdout + done.stderr
    return done.stdout + done.stderr


def move(clusters: Any, tmp: Path, *args: str, deployed: bool = False, ok: bool = True) -> str:
    return django(
        clusters, "uid_fields", "move-shards", "--map", "pics", "--from", "src", "--to",
        "dst", "--range", f"{LOW}:{HIGH}", *args, deployed=deployed, tmp=tmp, ok=ok,
    )  # fmt: skip


def rows(url: str, table: str, where: str) -> dict[int, tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute(f"SELECT * FROM {table} WHERE {where} ORDER BY id").fetchall()
    return {int(r[0]): tuple(r) for r in found}


def replication_objects(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [
            (str(kind), str(name))
            for kind, name in conn.execute(
                "SELECT 'publication', pubname FROM pg_publication UNION ALL "
                "SELECT 'subscription', subname FROM pg_subscription UNION ALL "
                "SELECT 'slot', slot_name FROM pg_replication_slots UNION ALL "
                "SELECT 'trigger', tgname FROM pg_trigger WHERE NOT tgisinternal"
            ).fetchall()
        ]


def test_move_shards_between_postgresql_databases_goes_by_logical_replication(
    clusters: tuple[PostgresCluster, PostgresCluster], tmp_path: Path
) -> None:
    source = clusters[0].database_url("pics_src")
    target = clusters[1].database_url("pics_dst")
    for alias in ("src", "dst"):
        django(clusters, "migrate", "--run-syncdb", "--database", alias, "-v", "0", tmp=tmp_path)
    django(clusters, code=SEED, tmp=tmp_path)
    pics, notes = "pics_pic", "pics_picnote"
    assert len(rows(source, pics, IN_RANGE)) > 40

    started = move(clusters, tmp_path)
    assert "copied and caught up" in started and "rows" in started, started
    assert len(rows(target, pics, "true")) == len(rows(source, pics, IN_RANGE))
    aborted = move(clusters, tmp_path, "--abort")
    assert "aborted" in aborted
    assert replication_objects(source) == replication_objects(target) == []
    assert rows(target, pics, "true") == {} and rows(target, notes, "true") == {}

    assert "switched:" in move(clusters, tmp_path, "--switch")  # starts, copies, switches
    unfenced = move(clusters, tmp_path, "--unfence")  # called off before the deploy
    assert "fence removed" in unfenced, unfenced
    with psycopg.connect(source, autocommit=True) as conn:  # the target's copy goes stale
        conn.execute(f"UPDATE {pics} SET caption = 'after unfence' WHERE {IN_RANGE}")

    move(clusters, tmp_path)  # a new start deletes the stale copies first
    with psycopg.connect(source, autocommit=True) as conn:  # replication carries these
        conn.execute(f"UPDATE {pics} SET caption = 'changed' WHERE {IN_RANGE} AND id % 3 = 0")
        conn.execute(f"UPDATE {notes} SET text = 'changed' WHERE {PIC_IN_RANGE} AND id % 3 = 1")
        conn.execute(f"DELETE FROM {notes} WHERE {PIC_IN_RANGE} AND pic_id % 5 = 0")
        conn.execute(
            f"DELETE FROM {pics} p WHERE {IN_RANGE} AND id % 5 = 0 "
            f"AND NOT EXISTS (SELECT FROM {notes} n WHERE n.pic_id = p.id)"
        )
    expected = {
        table: rows(source, table, w) for table, w in ((pics, IN_RANGE), (notes, PIC_IN_RANGE))
    }
    outside = {
        table: rows(source, table, f"NOT ({w})")
        for table, w in ((pics, IN_RANGE), (notes, PIC_IN_RANGE))
    }

    switched = move(clusters, tmp_path, "--switch")
    assert "switched:" in switched, switched
    with (
        psycopg.connect(source, autocommit=True) as conn,
        pytest.raises(psycopg.DatabaseError, match="uid_fields fence"),
    ):
        conn.execute(f"UPDATE {pics} SET caption = 'late' WHERE {IN_RANGE}")
    assert [k for k, _ in replication_objects(target)] == []
    assert {k for k, _ in replication_objects(source)} == {"trigger"}  # the fence only

    cleaned = move(clusters, tmp_path, "--cleanup", deployed=True)
    assert "rows deleted from the source" in cleaned
    for table, where in ((pics, IN_RANGE), (notes, PIC_IN_RANGE)):
        assert rows(target, table, "true") == expected[table]  # content, not presence
        assert rows(source, table, where) == {}
        assert rows(source, table, f"NOT ({where})") == outside[table]
    assert replication_objects(source) == replication_objects(target) == []
    again = move(clusters, tmp_path, "--cleanup", deployed=True)  # a rerun finds nothing
    assert "0 rows deleted" in again and "kept" not in again, again
    with psycopg.connect(source, autocommit=True) as conn:
        kinds = conn.execute(
            "SELECT relname, relreplident FROM pg_class WHERE relname LIKE 'pics_%' "
            "AND relkind = 'r'"
        ).fetchall()
    assert dict(kinds) == {pics: "d", notes: "d"}


def test_a_cleanup_without_the_fence_deletes_only_what_the_target_holds(
    clusters: tuple[PostgresCluster, PostgresCluster], tmp_path: Path
) -> None:
    """After the switch, the fence is what proves the source's range unchanged. Removed by
    hand, a process still on the old map can write the range on the source; the cleanup
    must then keep (and report) the rows the target never got, not delete the range."""
    source = clusters[0].database_url("pics_src")
    target = clusters[1].database_url("pics_dst")
    pics, notes = "pics_pic", "pics_picnote"
    for alias in ("src", "dst"):
        django(clusters, "migrate", "--run-syncdb", "--database", alias, "-v", "0", tmp=tmp_path)
    for url in (source, target):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {notes}, {pics}")
    django(clusters, code=SEED, tmp=tmp_path)
    assert "switched:" in move(clusters, tmp_path, "--switch")
    with psycopg.connect(source, autocommit=True) as conn:
        fence = [
            str(name)
            for (name,) in conn.execute(
                f"SELECT tgname FROM pg_trigger WHERE tgrelid = '{pics}'::regclass "
                "AND NOT tgisinternal"
            ).fetchall()
        ]
        assert fence  # the switch left the fence on
        for name in fence:
            conn.execute(f'DROP TRIGGER "{name}" ON {pics}')
        # A writer still on the old map, after the switch: the target never sees it.
        (late,) = conn.execute(
            f"INSERT INTO {pics} (id, owner_id, caption) SELECT max(id) + 1, 7, 'late' "
            f"FROM {pics} WHERE {IN_RANGE} RETURNING id"
        ).fetchone()
    with psycopg.connect(target, autocommit=True) as conn:  # the owner updates a row
        conn.execute(f"UPDATE {pics} SET caption = 'owner' WHERE id = (SELECT min(id) FROM {pics})")
    copied = rows(target, pics, "true")
    cleaned = move(clusters, tmp_path, "--cleanup", deployed=True, ok=False)
    assert "1 rows were kept on src" in cleaned, cleaned
    left = rows(source, pics, IN_RANGE)
    assert set(left) == {late} and left[late][2] == "late"  # kept; every copied row went
    assert late not in rows(target, pics, "true") and set(copied) <= set(rows(target, pics, "true"))
    assert rows(source, notes, PIC_IN_RANGE) == {}


NEW_MAP_WRITES = """
import random
import django
django.setup()
from tests.stress.logical_django.pics.models import Pic, PicNote
rand = random.Random(35)
for i in range(30):
    pic = Pic.objects.create(owner_id=rand.randrange(1, 1 << 40), caption=f"new{i}")
    PicNote.objects.create(pic=pic, text=f"new{i}")
for pic in Pic.objects.using("dst").order_by("id")[:5]:
    pic.caption = "changed under the new map"
    pic.save()
"""
OLD_MAP_WRITES = SEED.replace("Random(28)", "Random(36)").replace('f"p{i}"', 'f"old{i}"')


def test_a_map_deployed_before_the_switch_is_said_abort_refuses_and_the_switch_goes_forward(
    clusters: tuple[PostgresCluster, PostgresCluster], tmp_path: Path
) -> None:
    """Issue 35 through the command: half the fleet got the new map before --switch.
    The run under the new map says so (before: "Next: move-shards --switch"); --abort
    refuses and deletes nothing (before: it deleted the new map's rows and updates on
    the target); the switch run under the new map keeps them, and after the cleanup
    every row is on the target once, as last written."""
    source = clusters[0].database_url("pics_src")
    target = clusters[1].database_url("pics_dst")
    pics, notes = "pics_pic", "pics_picnote"
    for alias in ("src", "dst"):
        django(clusters, "migrate", "--run-syncdb", "--database", alias, "-v", "0", tmp=tmp_path)
    for url in (source, target):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {notes}, {pics}")
            # the fence a test before may leave (a cleanup that kept rows keeps it)
            for name, table in conn.execute(
                "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
            ).fetchall():
                conn.execute(f'DROP TRIGGER "{name}" ON {table}')
    django(clusters, code=SEED, tmp=tmp_path)
    assert "copied and caught up" in move(clusters, tmp_path)
    django(clusters, code=NEW_MAP_WRITES, deployed=True, tmp=tmp_path)  # half the fleet
    django(clusters, code=OLD_MAP_WRITES.replace("160", "20"), tmp=tmp_path)  # the rest

    early = move(clusters, tmp_path, deployed=True)
    assert "deployed before --switch" in early and "Next: move-shards --switch" not in early
    refused = move(clusters, tmp_path, "--abort", ok=False)
    assert "only copy" in refused and "nothing was deleted" in refused, refused
    assert "pics.Pic:" in refused and "5 rows changed there" in refused, refused
    expected = {
        table: {**rows(source, table, where), **rows(target, table, "true")}
        for table, where in ((pics, IN_RANGE), (notes, PIC_IN_RANGE))
    }
    made_there = set(expected[pics]) - set(rows(source, pics, IN_RANGE))
    assert made_there  # the new map's pictures, on the target only

    switched = move(clusters, tmp_path, "--switch", deployed=True)  # forward
    assert "switched:" in switched, switched
    move(clusters, tmp_path, "--cleanup", deployed=True)
    for table, where in ((pics, IN_RANGE), (notes, PIC_IN_RANGE)):
        assert rows(target, table, "true") == expected[table]  # each once, as last written
        assert rows(source, table, where) == {}
    assert replication_objects(source) == replication_objects(target) == []
