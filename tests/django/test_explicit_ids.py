"""Ids the caller gives: a new object's id must agree with its shard key, and a stored
row's id may not change to one that names another database.

The core decides both (``uid_fields.placement.new_objects``); these tests hold the
Django adapter to it on ``save()``, ``create()``, ``get_or_create()``, ``bulk_create()``
and ``QuerySet.update()``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.django.testapp.models import Order, Photo
from uid_fields import ShardKeyError, WrongShardError
from uid_fields.django import allow_off_shard_writes
from uid_fields.placement import Placement

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

OWNER = 7


def _placement(model: Any) -> Placement:
    placement: Placement = model._meta.pk.placement
    return placement


def _foreign_id(owner: int = OWNER) -> int:
    """An id made for another key, whose rows live on another database than ``owner``'s."""
    placement = _placement(Photo)
    home = placement.database_for_key(owner)
    other = next(k for k in range(1000) if placement.database_for_key(k) != home)
    value: int = placement.new_id(other)
    return value


def _stored_photos() -> list[tuple[int, int, str]]:
    return [
        (p.pk, p.owner_id, p._state.db)  # type: ignore[misc]
        for p in Photo.objects.on_all_shards()
    ]


def _refused(caught: pytest.ExceptionInfo[WrongShardError], given: int) -> None:
    placement = _placement(Photo)
    message = str(caught.value)
    assert str(given) in message and f"owner_id={OWNER}" in message
    assert placement.database_of(given) in message
    assert placement.database_for_key(OWNER) in message
    assert caught.value.expected == placement.database_for_key(OWNER)


# -- item 2: a new object's explicit id against its shard key --------------------------
def test_save_refuses_an_explicit_id_off_its_keys_database() -> None:
    given = _foreign_id()
    photo = Photo(id=given, owner_id=OWNER)
    with pytest.raises(WrongShardError) as caught:
        photo.save()
    _refused(caught, given)
    assert photo.pk == given  # never replaced
    later = Photo(owner_id=OWNER)
    later.id = given  # set after construction: the caller's id all the same
    with pytest.raises(WrongShardError):
        later.save()
    assert _stored_photos() == []


def test_create_and_get_or_create_refuse_a_mismatch() -> None:
    given = _foreign_id()
    with pytest.raises(WrongShardError) as caught:
        Photo.objects.create(id=given, owner_id=OWNER)
    _refused(caught, given)
    with pytest.raises(WrongShardError):
        Photo.objects.get_or_create(id=given, owner_id=OWNER)
    assert _stored_photos() == []


def test_bulk_create_refuses_a_mismatch_and_writes_nothing() -> None:
    given = _foreign_id()
    placement = _placement(Photo)
    objs = [
        Photo(owner_id=OWNER),
        Photo(id=placement.new_id(OWNER), owner_id=OWNER),
        Photo(id=given, owner_id=OWNER),
    ]
    with pytest.raises(WrongShardError) as caught:
        Photo.objects.bulk_create(objs)
    _refused(caught, given)
    assert _stored_photos() == []


def test_an_explicit_id_that_agrees_with_its_key_is_kept() -> None:
    placement = _placement(Photo)
    one, two, three = (placement.new_id(OWNER) for _ in range(3))
    Photo(id=one, owner_id=OWNER).save()
    Photo.objects.create(id=two, owner_id=OWNER)
    Photo.objects.bulk_create([Photo(id=three, owner_id=OWNER)])
    found = sorted(Photo.objects.filter(owner_id=OWNER).values_list("pk", flat=True))
    assert found == sorted([one, two, three])


def test_allow_off_shard_writes_lets_a_mismatch_through_as_given() -> None:
    given = _foreign_id()
    with allow_off_shard_writes():
        Photo.objects.create(id=given, owner_id=OWNER)
        Photo.objects.bulk_create([Photo(id=given + 1, owner_id=OWNER)])
    there = _placement(Photo).database_of(given)
    assert sorted(_stored_photos()) == [(given, OWNER, there), (given + 1, OWNER, there)]


def test_ids_the_field_made_follow_a_changed_key() -> None:
    placement = _placement(Photo)
    other = next(
        k for k in range(1000) if placement.database_for_key(k) != placement.database_for_key(7)
    )
    photo = Photo(owner_id=other)
    made = photo.pk
    photo.owner_id = OWNER
    photo.save()
    assert photo.pk != made
    bulk = Photo(owner_id=other)
    bulk.owner_id = OWNER
    Photo.objects.bulk_create([bulk])
    assert Photo.objects.filter(owner_id=OWNER).count() == 2


def test_neither_id_nor_key_is_a_shard_key_error() -> None:
    with pytest.raises(ShardKeyError):
        Photo(caption="x").save()
    with pytest.raises(ShardKeyError):
        Photo.objects.bulk_create([Photo(caption="x")])
    assert _stored_photos() == []


# -- item 3: changing a stored id -----------------------------------------------------
def _ids_around(old: int) -> tuple[int, int]:
    """An id on ``old``'s database, and one on another database."""
    placement = _placement(Order)
    home = placement.database_of(old)
    ids = Order._meta.pk.generator.next_ids(200)  # type: ignore[union-attr]
    same = next(i for i in ids if placement.database_of(i) == home)
    other = next(i for i in ids if placement.database_of(i) != home)
    return same, other


def test_save_with_a_pk_on_another_database_is_refused() -> None:
    old = Order.objects.create(note="n").pk
    _same, other = _ids_around(old)
    order = Order.objects.get(pk=old)
    order.pk = other
    with pytest.raises(WrongShardError, match=str(other)):
        order.save()
    assert Order.objects.on_all_shards().count() == 1
    assert Order.objects.filter(pk=old).exists()


def test_update_of_the_pk_to_another_database_is_refused() -> None:
    old = Order.objects.create(note="n").pk
    same, other = _ids_around(old)
    with pytest.raises(WrongShardError, match=str(other)):
        Order.objects.filter(pk=old).update(id=other)
    with pytest.raises(WrongShardError, match=str(other)):
        Order.objects.on_all_shards().filter(note="n").update(id=other)
    assert list(Order.objects.on_all_shards().values_list("pk", flat=True)) == [old]
    assert Order.objects.filter(pk=old).update(id=same) == 1  # same database: fine
    assert Order.objects.get(pk=same).note == "n"
    assert not Order.objects.filter(pk=old).exists()
