"""The per-row work of a keyed ``bulk_create``: each row's shard key is placed once.

A row of a model with a shard key gets its id when it is built (``Photo(owner_id=7)``),
from its key. Routing and ``bulk_create`` then need the same answer again: the id the
field made for the key the object still holds fits that key by construction, so the key
is not placed (hashed) again, and the settings are not read again for every row. These
tests count the calls of the real functions (a wrapper that calls through); they time
nothing. Correctness of what is kept stays covered by test_explicit_ids.py and
test_bulk.py: a key changed after construction still gets a new id, an explicit id off
its key's database is still refused.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from tests.django.testapp.models import Order, Photo
from uid_fields.django import conf
from uid_fields.django.query import new_objects as django_new_objects
from uid_fields.placement import Placement, authority

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

ROWS = 300


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts of the key placement, the key hash and the settings look-ups."""
    counted: Counter[str] = Counter()

    def counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return original(*args, **kwargs)

        return wrapper

    for name in ("logical_shard_for_key", "_hash_key"):
        monkeypatch.setattr(Placement, name, counting(name, getattr(Placement, name)))
    for name in ("get_generator", "get_shard_map"):
        monkeypatch.setattr(conf, name, counting(name, getattr(conf, name)))
    # The key hash itself, on every path that places a key (the general one and the
    # one the construction hook binds once per settings generation).
    monkeypatch.setattr(authority, "mix64", counting("mix64", authority.mix64))
    monkeypatch.setattr(
        django_new_objects,
        "ids_for_new_objects",
        counting("ids_for_new_objects", django_new_objects.ids_for_new_objects),
    )
    yield counted


def test_a_keyed_bulk_create_places_each_row_once(calls: Counter[str]) -> None:
    assert Photo._meta.pk.placement is not None  # type: ignore[union-attr]  # read before counting
    calls.clear()
    photos = [Photo(owner_id=owner, caption="x") for owner in range(ROWS)]
    Photo.objects.bulk_create(photos)
    assert calls["mix64"] == ROWS  # each key hashed once, when its id was made
    assert calls["logical_shard_for_key"] <= ROWS  # the general path, if taken, once
    assert calls["_hash_key"] <= ROWS
    # Every object holds the id made for the key it still holds: the batch's general
    # rule has nothing to decide and is not run over the rows again.
    assert calls["ids_for_new_objects"] == 0
    assert calls["get_generator"] + calls["get_shard_map"] <= 2  # not per row
    placement = Photo._meta.pk.placement  # type: ignore[union-attr]
    for photo in photos:  # each on the database its key names, with an id made for it
        assert photo._state.db == placement.database_for_key(photo.owner_id)
        assert placement.fits_key(photo.pk, photo.owner_id)
    stored = Counter(p._state.db for p in Photo.objects.on_all_shards())
    assert stored == Counter(p._state.db for p in photos)


def test_a_key_changed_after_construction_is_placed_again(calls: Counter[str]) -> None:
    placement: Placement = Photo._meta.pk.placement  # type: ignore[union-attr]
    home = placement.database_for_key(7)
    away = next(k for k in range(1000) if placement.database_for_key(k) != home)
    photos = [Photo(owner_id=away) for _ in range(5)]
    made = [p.pk for p in photos]
    for photo in photos:
        photo.owner_id = 7
    calls.clear()
    Photo.objects.bulk_create(photos)
    assert calls["ids_for_new_objects"] == 1  # a changed key takes the general rule
    assert all(p.pk != m for p, m in zip(photos, made, strict=True))
    assert {p._state.db for p in photos} == {home}
    assert Photo.objects.using(home).filter(owner_id=7).count() == 5


def test_a_keyless_bulk_create_reads_the_settings_once(calls: Counter[str]) -> None:
    orders = [Order(note=str(i)) for i in range(ROWS)]
    calls.clear()
    Order.objects.bulk_create(orders)
    assert calls["get_generator"] + calls["get_shard_map"] <= 2
    placement = Order._meta.pk.placement  # type: ignore[union-attr]
    assert all(o._state.db == placement.database_of(o.pk) for o in orders)


def test_objects_built_before_a_settings_change_follow_the_new_map() -> None:
    """What a field recorded when it made an id is its placement's: after the settings
    change (the same databases in reverse order), the rows are placed by the new map."""
    before: Placement = Photo._meta.pk.placement  # type: ignore[union-attr]
    photos = [Photo(owner_id=owner) for owner in range(40)]
    old = list(settings.UID_FIELDS["SHARDS"]["main"]["databases"])
    new = list(reversed(old))
    config = copy.deepcopy(settings.UID_FIELDS)
    config["SHARDS"]["main"]["databases"] = new
    expected = {p.pk: new[old.index(before.database_for_key(p.owner_id))] for p in photos}
    assert any(expected[p.pk] != before.database_for_key(p.owner_id) for p in photos)
    with override_settings(UID_FIELDS=config):
        Photo.objects.bulk_create(photos)
        assert {p.pk: p._state.db for p in photos} == expected
        for photo in photos:
            assert Photo.objects.using(expected[photo.pk]).filter(pk=photo.pk).exists()
