"""The portable mover when the new map reached part of the fleet before ``--switch``
(issue 35): processes on the new map write the moving range on the target (new rows,
new versions of copied rows) while processes on the old map go on writing the source.

``move-shards`` run under the new map then says the map was deployed early and what to
do (before: "deployed: run move-shards --cleanup"); ``--cleanup`` without a switch keeps
every source row the target holds in another version; ``--abort`` refuses, naming the
tables and counts, and deletes nothing; the documented way back (the old map everywhere,
``--abort --copy-back``) leaves every row the application wrote exactly once, as last
written, on the source. Runs on each backend of the suite (SQLite first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError

from tests.django.test_move_shards import MODELS, SOURCE, TARGET, deployed, everything, make_rows
from tests.django.test_move_shards import move as run_move
from tests.django.testapp.models import Order
from uid_fields.django.ops.moves import shard_move

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)

EVERY = [*settings.SHARDS, TARGET]


@pytest.fixture(autouse=True)
def no_fence_left() -> Any:
    yield
    shard_move("main", source=SOURCE, target=TARGET).fence.remove()


def orders_on(alias: str, n: int, tag: str) -> list[Order]:
    """``n`` orders made through the router that land on ``alias`` (the others stay where
    their ids put them): the ids are random, the counts of the test are not."""
    made: list[Order] = []
    for i in range(50 * n):  # bounded: a quarter of the ids land on each database
        order = Order.objects.create(note=f"{tag}{i}")
        if order._state.db == alias:
            made.append(order)
            if len(made) == n:
                return made
    raise AssertionError(f"not {n} orders on {alias}")


def early_deploy(
    state: str, *, old_update: bool = False
) -> tuple[dict[str, dict[Any, tuple[Any, ...]]], int, int]:
    """Copy, then write under both maps: what the application last wrote, by model; how
    many orders were changed on the target, and how many made there."""
    make_rows(8, "seed")
    orders_on(SOURCE, 4, "seed")
    run_move("--state", state)  # copied; no --switch yet
    copied = list(Order._base_manager.using(TARGET).order_by("pk")[:4])
    copied, stale = copied[:3], copied[3]
    with deployed():  # part of the fleet on the new map: the range goes to the target
        make_rows(3, "new")
        orders_on(TARGET, 3, "new")
        for order in copied:
            order.note = "changed under the new map"
            order.save()
    make_rows(3, "old")  # the rest still on the old map: the range goes to the source
    orders_on(SOURCE, 2, "old")
    if old_update:  # the old map changes a copied row on the source: the target's is stale
        Order.objects.filter(pk=stale.pk).update(note="changed under the old map")
    written: dict[str, dict[Any, tuple[Any, ...]]] = {}
    found = {alias: everything([alias]) for alias in EVERY}
    for model in MODELS:
        label = model._meta.label
        rows: dict[Any, tuple[Any, ...]] = {}
        for alias in [*settings.SHARDS, TARGET]:  # the target's version is the last written
            rows.update(found[alias][label])
        written[label] = rows
    if old_update:  # the source's version is the last written of this one
        written[Order._meta.label][stale.pk] = (stale.pk, "changed under the old map")
    changed = {o.pk for o in copied}
    assert all(written[Order._meta.label][pk][1] == "changed under the new map" for pk in changed)
    made = set(found[TARGET][Order._meta.label]) - set(found[SOURCE][Order._meta.label])
    assert len(copied) == 3 and len(made) >= 3
    return written, len(changed), len(made)


def test_a_run_under_the_new_map_before_the_switch_says_it_was_deployed_early(
    tmp_path: Path,
) -> None:
    state = str(tmp_path / "move.json")
    written, changed_orders, _ = early_deploy(state, old_update=True)
    with deployed():
        with pytest.raises(CommandError) as said:
            run_move("--state", state)
        assert "deployed before --switch" in str(said.value), said.value
        assert "--abort --copy-back" in str(said.value)
        with pytest.raises(
            CommandError, match=f"{changed_orders + 1} of them are there in another"
        ):
            run_move("--state", state, "--cleanup")
    found = {alias: everything([alias]) for alias in EVERY}
    for label, rows in written.items():  # nothing the application wrote is gone
        assert set(rows) <= {key for alias in EVERY for key in found[alias][label]}, label
    order = Order._meta.label
    on_source = everything([SOURCE])[order]
    changed = [pk for pk, row in written[order].items() if row[1] == "changed under the new map"]
    assert all(pk in on_source for pk in changed)  # the source's versions were kept
    newer = [row for row in on_source.values() if row[1] == "changed under the old map"]
    assert len(newer) == 1  # the only copy of that update (before: deleted by the cleanup)


def test_abort_after_an_early_deploy_refuses_then_copies_back_and_keeps_every_row_once(
    tmp_path: Path,
) -> None:
    state = str(tmp_path / "move.json")
    written, changed_orders, made_orders = early_deploy(state)
    with deployed(), pytest.raises(CommandError, match="deployed before --switch"):
        run_move("--state", state, "--abort")  # under the new map: the target owns it
    before = everything([TARGET])
    with pytest.raises(CommandError) as refused:  # the old map everywhere again
        run_move("--state", state, "--abort")
    said = str(refused.value)
    assert "only copy" in said and "nothing was deleted" in said, said
    orders = f"testapp.Order: {made_orders} rows only on the target, {changed_orders} rows changed"
    assert orders in said, said
    assert everything([TARGET]) == before  # nothing deleted
    with pytest.raises(CommandError, match="goes with --abort"):
        run_move("--state", state, "--copy-back")
    aborted = run_move("--state", state, "--abort", "--copy-back")
    assert "aborted" in aborted
    after = everything(EVERY)  # no id on two databases (asserted inside)
    for label, rows in written.items():
        assert after[label] == rows, label  # each row once, as last written
        assert everything([TARGET])[label] == {}, label  # on the source, not the target
    assert not Path(state).exists()  # called off: the next move starts over
