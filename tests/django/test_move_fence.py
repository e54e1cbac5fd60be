"""``move-shards --switch``: the moving range closed for writes on the source, live.

A writer keeps inserting, updating and deleting rows (through the router, so some are
the moving server's) while the switch closes the range: its writes there fail with
``ShardMoveFencedError`` on every Django path, its other writes go on, and the copy
behind the fence is exact. Runs on each backend of the suite.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections, transaction

from tests.django.test_move_shards import SOURCE, TARGET, deployed, everything, make_rows
from tests.django.testapp.models import Customer, PageView, Photo, Snap
from uid_fields import ShardMoveFencedError, UidFieldsError
from uid_fields.django.ops.audit import audit
from uid_fields.django.ops.moves import map_models, shard_move

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


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
            "-v",
            "0",
            *args,
            stdout=out,
        )
    finally:
        print(out.getvalue())  # shown when the test fails
    return out.getvalue()


@pytest.fixture(autouse=True)
def no_fence_left() -> Iterator[None]:
    yield
    shard_move("main", source=SOURCE, target=TARGET).fence.remove()  # the flush deletes


class Writer(threading.Thread):
    """Inserts, updates and deletes rows until stopped; counts what the fence refused."""

    def __init__(self, seed: int) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.rounds = 0
        self.fenced: dict[str, int] = {"insert": 0, "update": 0, "delete": 0}
        self.fenced_errors: list[ShardMoveFencedError] = []
        self.random = random.Random(seed)

    def attempt(self, kind: str, write: Any) -> None:
        try:
            write()
        except ShardMoveFencedError as exc:
            self.fenced[kind] += 1
            self.fenced_errors.append(exc)

    def run(self) -> None:
        try:
            while not self.stop.is_set() and self.rounds < 400:
                n = self.rounds
                self.attempt("insert", lambda n=n: Photo.objects.create(owner_id=n, caption="w"))
                self.attempt("insert", lambda n=n: Customer.objects.create(name=f"w{n}"))
                shard = self.random.choice(settings.SHARDS)
                photos = list(Photo.objects.using(shard).values_list("pk", flat=True)[:50])
                if photos:
                    pk = self.random.choice(photos)
                    self.attempt(
                        "update",
                        lambda pk=pk, n=n: Photo.objects.filter(pk=pk).update(caption=f"u{n}"),
                    )
                views = list(PageView.objects.using(shard)[:50])
                if views:
                    view = self.random.choice(views)
                    self.attempt("delete", view.delete)
                self.rounds += 1
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connections.close_all()


@pytest.fixture
def writer() -> Iterator[Writer]:
    thread = Writer(28)
    thread.start()
    yield thread
    thread.stop.set()
    thread.join(60)


def wait_for(writer: Writer, rounds: int) -> None:
    start = writer.rounds
    while writer.rounds < start + rounds and writer.is_alive():
        threading.Event().wait(0.01)


def test_the_switch_closes_the_range_and_the_copy_behind_it_is_exact(
    tmp_path: Path, writer: Writer
) -> None:
    make_rows(10, "a")
    state = str(tmp_path / "move.json")
    wait_for(writer, 2)
    move("--state", state)  # the copy, writes going on
    switched = move("--state", state, "--switch")
    assert "switched: writes of the range are closed" in switched
    assert switched.count("counts and checksums match") == len(map_models("main"))
    fence = shard_move("main", source=SOURCE, target=TARGET).fence
    assert fence.closed
    source_then = everything([SOURCE])
    wait_for(writer, 15)  # writes go on behind the fence
    assert writer.error is None
    assert everything([SOURCE]) == source_then  # nothing reached the moving range
    assert everything([TARGET]) == source_then  # the copy is exact
    assert writer.fenced["insert"] > 0 and writer.fenced["update"] + writer.fenced["delete"] > 0
    refused = writer.fenced_errors[0]
    assert isinstance(refused, UidFieldsError) and refused.retryable
    assert refused.move == f"main {SOURCE}->{TARGET} all" and refused.database == SOURCE
    assert f"main {SOURCE}->{TARGET} all" in str(refused) and "Retry" in str(refused)
    others = [db for db in settings.SHARDS if db != SOURCE]
    assert sum(Photo.objects.using(db).filter(caption="w").count() for db in others) > 0

    writer.stop.set()
    writer.join(60)
    with deployed():
        cleaned = move("--cleanup")
        assert "kept" not in cleaned
        assert fence.installed() == []  # the fence goes with the copies
        assert sum(r.misplaced for r in audit()) == 0
        assert everything([TARGET]) == source_then


def test_every_django_write_path_is_refused_with_the_fence_and_the_unfence_reopens(
    tmp_path: Path,
) -> None:
    make_rows(2, "p")
    photo = Photo.objects.create(owner_id=8191, caption="p")  # Instagram's logical shard 8191
    assert photo._state.db == SOURCE
    snap = Snap.objects.create(label="s")
    while snap._state.db != SOURCE:
        snap = Snap.objects.create(label="s")
    while not Customer.objects.using(SOURCE).exists():
        Customer.objects.create(name="c")
    move("--state", str(tmp_path / "move.json"), "--switch")
    again = move("--state", str(tmp_path / "move.json"), "--switch")  # again: checks only
    assert "switched:" in again and "copy " not in again and "catch-up" not in again
    shard_move("main", source=SOURCE, target=TARGET).fence.install()  # again: idempotent
    owner = photo.owner_id

    def refused(write: Any) -> ShardMoveFencedError:
        with pytest.raises(ShardMoveFencedError) as caught:
            write()
        return caught.value

    error = refused(lambda: Photo.objects.create(owner_id=owner, caption="new"))
    assert error.table == "testapp.Photo" and error.low is not None and error.high is not None
    photo.caption = "changed"
    refused(photo.save)
    refused(lambda: Photo.objects.filter(pk=photo.pk).update(caption="changed"))
    refused(lambda: Photo.objects.using(SOURCE).filter(pk=photo.pk).delete())
    refused(lambda: Photo.objects.bulk_create([Photo(owner_id=owner, caption="bulk")]))
    refused(lambda: Photo.objects.using(SOURCE).bulk_update([photo], ["caption"]))
    refused(snap.delete)
    whole = refused(lambda: Customer.objects.using(SOURCE).update(name="x"))
    assert whole.low is None  # a route SQL cannot compute: the whole table is closed

    def in_a_transaction() -> None:
        with transaction.atomic(using=SOURCE):
            Snap.objects.using(SOURCE).filter(pk=snap.pk).update(label="t")

    refused(in_a_transaction)
    with connections[SOURCE].cursor() as cursor, pytest.raises(ShardMoveFencedError):
        cursor.execute(f"DELETE FROM {Photo._meta.db_table}")
    elsewhere = next(db for db in settings.SHARDS if db != SOURCE)
    Photo.objects.using(elsewhere).filter(caption="").update(caption="free")  # not fenced
    assert Photo.objects.using(SOURCE).get(pk=photo.pk).caption == "p"  # nothing got in

    opened = move("--state", str(tmp_path / "move.json"), "--unfence")
    assert "fence removed" in opened
    Photo.objects.filter(pk=photo.pk).update(caption="after")
    assert Photo.objects.using(SOURCE).get(pk=photo.pk).caption == "after"
    with pytest.raises(CommandError, match="already gives"), deployed():
        move("--switch")
