"""``manage.py uid_fields move-shards``: a server's logical shards onto a new one, live.

Every sharded model of the test app moves (snowflakes by mixed modulo, Instagram ids,
co-located children, locality UUIDs, decimal ids, uniqids, a child that follows its
parent), from ``shard_3`` to the spare ``shard_4``, while another thread keeps writing.
Runs on each backend of the suite: SQLite, PostgreSQL and MariaDB shards.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.models.signals import post_delete
from django.test.utils import override_settings

from tests.django.testapp.models import (
    Customer,
    LegacyRow,
    Order,
    OrderLine,
    PageView,
    Photo,
    PhpRow,
    Purchase,
    PurchaseLine,
    Snap,
    Stamp,
)
from uid_fields import ShardMoveFencedError
from uid_fields.django import allow_off_shard_writes
from uid_fields.django.ops.audit import audit
from uid_fields.django.ops.moves import map_models, shard_move
from uid_fields.ops.moves import Progress

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

SOURCE, TARGET = "shard_3", settings.SPARE
MODELS = [
    Stamp,
    Customer,
    Purchase,
    PurchaseLine,
    Order,
    OrderLine,
    Photo,
    PageView,
    LegacyRow,
    PhpRow,
    Snap,
]


def deployed() -> override_settings:
    """The new map: shard_4 takes shard_3's place (and so its logical shards)."""
    config = copy.deepcopy(settings.UID_FIELDS)
    config["SHARDS"]["main"]["databases"] = [*settings.SHARDS[:3], TARGET]
    return override_settings(UID_FIELDS=config)


def make_rows(n: int, tag: str) -> None:
    for i in range(n):
        customer = Customer.objects.create(name=f"{tag}{i}")
        purchase = Purchase.objects.create(customer=customer, total=i)
        PurchaseLine.objects.create(purchase=purchase, sku=f"{tag}{i}")
        order = Order.objects.create(note=f"{tag}{i}")
        OrderLine.objects.create(order=order, sku=f"{tag}{i}")
        Photo.objects.create(owner_id=i, caption=tag)
        PageView.objects.create(path=f"/{tag}/{i}")
        LegacyRow.objects.create(label=tag)
        PhpRow.objects.create(label=tag)
        Snap.objects.create(label=tag)
        Stamp.objects.create()


def everything(aliases: list[str]) -> dict[str, dict[Any, tuple[Any, ...]]]:
    """Every row of every moved model on these databases, by id; no id may be on two."""
    found: dict[str, dict[Any, tuple[Any, ...]]] = {}
    for model in MODELS:
        rows: dict[Any, tuple[Any, ...]] = {}
        for alias in aliases:
            for row in model._base_manager.using(alias).values_list():
                assert row[0] not in rows, f"{model.__name__} {row[0]} is on two databases"
                rows[row[0]] = row
        found[model._meta.label] = rows
    return found


def on(alias: str) -> int:
    return sum(m._base_manager.using(alias).count() for m in MODELS)


class Writer(threading.Thread):
    """Writes rows (through the router, so some land on the source) until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.rounds = self.fenced = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    make_rows(2, f"w{self.rounds}-")
                except ShardMoveFencedError:
                    self.fenced += 1  # the switch closed the moving range: retried later
                self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connections.close_all()


@pytest.fixture(autouse=True)
def no_fence_left() -> Iterator[None]:
    yield
    shard_move("main", source=SOURCE, target=TARGET).fence.remove()  # the flush deletes


@pytest.fixture
def writer() -> Iterator[Writer]:
    thread = Writer()
    thread.start()
    yield thread
    thread.stop.set()
    thread.join(30)


def move(*args: str) -> str:
    out = StringIO()
    try:
        call_command(
            "uid_fields",
            "move-shards",
            "--map",
            "main",
            "--from",
            SOURCE,
            "--to",
            TARGET,
            *args,
            stdout=out,
        )
    finally:
        print(out.getvalue())  # shown when the test fails
    return out.getvalue()


def test_every_model_moves_with_writes_going_on(tmp_path: Path, writer: Writer) -> None:
    make_rows(12, "a")
    state = str(tmp_path / "move.json")
    while writer.rounds < 2:  # the writer is under way before the copy starts
        threading.Event().wait(0.01)
    first = move("--batch-size", "7", "--state", state)
    assert "copy " in first and "catch-up" in first and "rows/s" in first and "ETA" in first
    assert "next: run move-shards --switch" in first
    switched = move("--batch-size", "7", "--state", state, "--switch")  # writes going on
    assert "switched:" in switched
    rounds = writer.rounds
    while writer.rounds < rounds + 2:  # behind the fence, the writer goes on
        threading.Event().wait(0.01)
    writer.stop.set()
    writer.join(30)
    assert writer.error is None and writer.rounds > 2 and writer.fenced > 0
    before = everything(settings.SHARDS)  # shard_4 holds copies
    on_source = on(SOURCE)
    assert on_source > 0

    with pytest.raises(CommandError, match="deploy the new map"):
        move("--cleanup")

    deleted: list[object] = []

    def count_deletes(sender: type, instance: object, **kwargs: object) -> None:
        deleted.append(instance)  # a handler that removes a file would remove the twin's

    post_delete.connect(count_deletes, dispatch_uid="move-shards-test")
    with deployed():
        second = move("--batch-size", "7", "--state", state)  # checks, copies nothing
        assert "copy " not in second.split("\n", 1)[1] and "catch-up" not in second
        assert "deployed: run move-shards --cleanup" in second
        assert second.count("every row on the target") == len(map_models("main"))
        cleaned = move("--batch-size", "7", "--cleanup")
        post_delete.disconnect(dispatch_uid="move-shards-test")
        assert deleted == []  # copies go without signals
        assert "rows deleted from the source" in cleaned and "kept" not in cleaned
        assert on(SOURCE) == 0
        assert sum(r.misplaced for r in audit()) == 0
        after = everything([*settings.SHARDS, TARGET])
        assert after == before  # nothing lost, nothing doubled, nothing changed
        for label, rows in after.items():
            model = next(m for m in MODELS if m._meta.label == label)
            if model is OrderLine:
                continue  # its ids name no shard: it is read through its order
            for pk in list(rows)[:3]:
                assert model.objects.get(pk=pk).pk == pk  # the router reads shard_4 now
        make_rows(4, "new")  # new rows of those logical shards go to shard_4
        assert on(SOURCE) == 0 and on(TARGET) > 0


def test_a_stopped_copy_resumes_where_it_stopped(tmp_path: Path) -> None:
    make_rows(20, "r")
    state = tmp_path / "move.json"
    stops: list[Progress] = []

    def stop_after_a_batch(progress: Progress) -> None:
        if progress.phase == "copy" and progress.done and (progress.total or 0) > 4:
            stops.append(progress)
            raise KeyboardInterrupt  # as if the operator pressed Ctrl-C

    stopped = shard_move(
        "main", source=SOURCE, target=TARGET, batch=2, state=state, on_progress=stop_after_a_batch
    )
    with pytest.raises(KeyboardInterrupt):
        stopped.copy()
    assert state.exists() and len(stops) == 1
    at = stops[0]
    resumed = shard_move("main", source=SOURCE, target=TARGET, batch=2, state=state)
    reports = resumed.copy()
    copied = [r for r in reports if r.phase == "copy"]
    labels = [t.store.label for t in resumed.tables]
    assert [r.table for r in copied] == labels[labels.index(at.table) :]  # done ones skipped
    assert copied[0].read == at.total - at.done  # the rows before the stop not read again
    assert all(check.ok for check in resumed.verify())


def test_verify_finds_and_repairs_a_differing_copy() -> None:
    make_rows(10, "v")
    moving = shard_move("main", source=SOURCE, target=TARGET, batch=5)
    moving.copy()
    assert all(check.ok for check in moving.verify(repair=False))
    changed = Photo.objects.using(TARGET).order_by("pk").first()
    assert changed is not None
    Photo.objects.using(TARGET).filter(pk=changed.pk).update(caption="edited on the copy")
    lost = PageView.objects.using(TARGET).order_by("pk").first()
    assert lost is not None
    PageView.objects.using(TARGET).filter(pk=lost.pk).delete()
    stray = uuid.uuid4()
    placement = PageView._meta.pk.placement  # type: ignore[union-attr]
    while placement.database_of(stray) != SOURCE:
        stray = uuid.uuid4()
    with allow_off_shard_writes():
        PageView.objects.using(TARGET).bulk_create([PageView(id=stray, path="/only-on-the-copy")])
    checks = {c.table: c for c in moving.verify(repair=False)}
    assert not checks["testapp.Photo"].ok and not checks["testapp.PageView"].ok
    assert checks["testapp.Photo"].source_rows == checks["testapp.Photo"].target_rows
    assert all(c.ok for c in moving.verify())  # repaired: copied again, checked again
    assert Photo.objects.using(TARGET).get(pk=changed.pk).caption == changed.caption
    assert PageView.objects.using(TARGET).filter(pk=lost.pk).exists()
    assert not PageView.objects.using(TARGET).filter(pk=stray).exists()


PAST = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def made_long_ago(count: int) -> list[Stamp]:
    """Rows on the source whose ids were made at ``PAST``: older than any catch-up looks."""
    field = Stamp._meta.pk
    first = field.layout.min_id(PAST)  # type: ignore[union-attr]
    ids = [i for i in range(first, first + 400) if field.placement.database_of(i) == SOURCE]  # type: ignore[union-attr]
    return [Stamp.objects.create(id=pk) for pk in ids[:count]]


def test_a_copy_keeps_the_timestamps_django_sets_on_save() -> None:
    made_long_ago(12)
    Stamp.objects.using(SOURCE).update(created=PAST, changed=PAST)
    shard_move("main", source=SOURCE, target=TARGET).copy()
    copied = list(Stamp.objects.using(TARGET).values_list("created", "changed"))
    assert copied and set(copied) == {(PAST, PAST)}


def test_the_catch_up_reads_only_rows_made_since_the_copy_began(tmp_path: Path) -> None:
    state = tmp_path / "move.json"
    made_long_ago(12)
    first = shard_move("main", source=SOURCE, target=TARGET, state=state).copy()
    caught = next(r for r in first if r.phase == "catch-up" and r.table == "testapp.Stamp")
    assert caught.read == 0  # made long before the copy began: not looked at again
    new = [s.pk for s in (Stamp.objects.create() for _ in range(40)) if s._state.db == SOURCE]
    assert new
    again = shard_move("main", source=SOURCE, target=TARGET, state=state).copy()
    stamps = [r for r in again if r.table == "testapp.Stamp"]
    assert [r.phase for r in stamps] == ["catch-up"]  # the copy is not walked again
    assert stamps[0].read == stamps[0].inserted == len(new)  # found by their ids' time
    assert set(new) <= set(Stamp.objects.using(TARGET).values_list("pk", flat=True))


def test_parents_come_before_children_and_every_model_of_the_map_moves() -> None:
    labels = [t.store.label for t in map_models("main")]
    for parent, child in [(Customer, Purchase), (Purchase, PurchaseLine), (Order, OrderLine)]:
        assert labels.index(parent._meta.label) < labels.index(child._meta.label)
    assert {m._meta.label for m in MODELS} <= set(labels)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--to", "nowhere"], "not a database"),
        (["--range", "1:"], "start:stop"),
        (["--range", "5:5"], "empty"),
        (["--range", "6144:6145"], "not a whole number"),
    ],
)
def test_bad_moves_are_refused_before_anything_is_written(args: list[str], error: str) -> None:
    make_rows(2, "x")
    with pytest.raises(CommandError, match=error):
        move(*args)
    assert on(TARGET) == 0


@pytest.mark.skipif(not settings.DATABASE_IDS, reason="ids made by PostgreSQL")
def test_the_new_server_stamps_its_own_logical_shards_once_deployed() -> None:
    from tests.django.pgapp.models import DbPhoto

    def made_on(alias: str) -> int:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT uid_next_id()")
            return int(cursor.fetchone()[0])

    with pytest.raises(Exception, match="owns no logical shard yet"):
        made_on(TARGET)  # incoming: migrated, but it makes no id of a range it lacks
    with deployed():
        out = StringIO()
        with pytest.raises(CommandError, match="does not use logical shard"):
            call_command("uid_fields", "check-db", "--database", TARGET, stdout=out)
        call_command("uid_fields", "check-db", "--database", TARGET, "--fix", stdout=out)
        call_command("uid_fields", "check-db", stdout=out)  # every database: ok
        placement = DbPhoto._meta.pk.placement  # type: ignore[union-attr]
        assert placement.database_of(made_on(TARGET)) == TARGET


def test_a_dry_run_cleanup_reports_what_it_would_delete_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    make_rows(6, "d")
    state = str(tmp_path / "move.json")
    move("--state", state)
    on_source = on(SOURCE)
    assert on_source > 0
    with pytest.raises(CommandError, match="goes with --cleanup"):
        move("--dry-run")
    move("--state", state, "--switch")
    with deployed():
        move("--state", state)
        dry = move("--cleanup", "--dry-run", "-v", "0")
        assert "rows would be deleted from the source" in dry and "nothing deleted" in dry
        would = sum(
            int(line.split(": ")[1].split()[0])
            for line in dry.splitlines()
            if line.startswith("cleanup ")
        )
        assert would == on_source
        assert on(SOURCE) == on_source  # nothing deleted
        cleaned = move("--cleanup")
        assert "rows deleted from the source" in cleaned
        assert on(SOURCE) == 0


def test_progress_lines_respect_verbosity_0(tmp_path: Path) -> None:
    make_rows(3, "q")
    quiet = move("-v", "0", "--state", str(tmp_path / "move.json"))
    assert "rows/s" not in quiet and "ETA" not in quiet
    assert "next: run move-shards --switch" in quiet  # the result is still said
