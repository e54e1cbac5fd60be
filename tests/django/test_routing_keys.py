"""Routing by several keys (issue 25, item 14).

The shard key with ``__in`` (``customer__in=[c1, c2]``, ``owner_id__in=[...]``) and
conditions given as ``Q`` objects name the shards they can match: a list of keys reads the
union of their shards, an AND reads the shards all its routing parts share, an OR the
union when every branch names shards. Only what names no shard is refused (an OR with a
branch that names none, a negation, a subquery of keys). Before, every one of these
raised ``ShardRoutingError``.
"""

from __future__ import annotations

import pytest
from django.db.models import Q

from tests.django.helpers import capture_all
from tests.django.testapp.models import Customer, Order, Photo, Purchase
from uid_fields.errors import ShardRoutingError

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def owners_on_two_shards() -> tuple[int, int]:
    """Two owner ids whose photos live on different databases."""
    field = Photo._meta.pk
    first = 1
    for other in range(2, 200):
        if field.databases_for_key(other) != field.databases_for_key(first):
            return first, other
    raise AssertionError("every owner on one shard")


def customers_on_shards(count: int = 12) -> list[Customer]:
    made = [Customer.objects.create(name=f"c{i}") for i in range(count)]
    assert len({c._state.db for c in made}) > 2
    return made


def selects(log: object) -> set[str]:
    return log.aliases("SELECT")  # type: ignore[attr-defined,no-any-return]


def test_the_shard_key_foreign_key_with_in() -> None:
    customers = customers_on_shards()
    a, b = customers[0], next(c for c in customers if c._state.db != customers[0]._state.db)
    mine = [Purchase.objects.create(customer=c, total=i) for i, c in enumerate((a, a, b))]
    Purchase.objects.create(customer=next(c for c in customers if c not in (a, b)))
    with capture_all() as log:
        found = list(Purchase.objects.filter(customer__in=[a, b]).order_by("pk"))
    assert [p.pk for p in found] == sorted(p.pk for p in mine)
    assert selects(log) == {a._state.db, b._state.db}  # only the shards the keys name
    by_id = Purchase.objects.filter(customer_id__in=[a.pk, b.pk])
    assert by_id.shard_aliases == Purchase.objects.filter(customer__in=[a, b]).shard_aliases
    assert Purchase.objects.filter(customer__pk__in=[a.pk]).shard_aliases == (a._state.db,)
    assert Purchase.objects.filter(customer__in=[a, b]).count() == 3


def test_the_shard_key_column_with_in() -> None:
    one, two = owners_on_two_shards()
    photos = [Photo.objects.create(owner_id=owner) for owner in (one, two, two)]
    Photo.objects.create(owner_id=one + two + 1000)
    field = Photo._meta.pk
    wanted = {*field.databases_for_key(one), *field.databases_for_key(two)}
    query = Photo.objects.filter(owner_id__in=[one, two])
    assert set(query.shard_aliases) == wanted
    with capture_all() as log:
        assert sorted(p.pk for p in query) == sorted(p.pk for p in photos)
    assert selects(log) == wanted
    assert list(Photo.objects.filter(owner_id__in=[])) == []


def test_a_q_that_ands_the_shard_key_with_other_conditions() -> None:
    one, two = owners_on_two_shards()
    hit = Photo.objects.create(owner_id=one, caption="sun")
    Photo.objects.create(owner_id=one, caption="rain")
    Photo.objects.create(owner_id=two, caption="sun")
    (alias,) = Photo._meta.pk.databases_for_key(one)
    for query in (
        Photo.objects.filter(Q(owner_id=one) & Q(caption="sun")),
        Photo.objects.filter(Q(owner_id=one), caption="sun"),
        Photo.objects.filter(Q(caption="sun"), owner_id=one),
        Photo.objects.filter(Q(Q(owner_id=one) & Q(caption__startswith="s"))),
    ):
        assert query.shard_aliases == (alias,)
        with capture_all() as log:
            assert [p.pk for p in query] == [hit.pk]
        assert selects(log) == {alias}
    assert Photo.objects.get(Q(owner_id=one) & Q(caption="sun")).pk == hit.pk


def test_a_q_of_ids() -> None:
    orders = [Order.objects.create(note=f"o{i}") for i in range(8)]
    first = orders[0]
    assert Order.objects.get(Q(pk=first.pk)).pk == first.pk
    assert Order.objects.filter(Q(id=first.pk) & Q(note="o0")).shard_aliases == (first._state.db,)
    ids = [o.pk for o in orders[:3]]
    found = Order.objects.filter(Q(pk__in=ids))
    assert set(found.shard_aliases) == {o._state.db for o in orders[:3]}
    assert sorted(o.pk for o in found) == sorted(ids)


def test_an_or_of_keys_reads_the_union() -> None:
    one, two = owners_on_two_shards()
    photos = [Photo.objects.create(owner_id=owner) for owner in (one, two)]
    query = Photo.objects.filter(Q(owner_id=one) | Q(owner_id=two))
    field = Photo._meta.pk
    assert set(query.shard_aliases) == {
        *field.databases_for_key(one),
        *field.databases_for_key(two),
    }
    assert sorted(p.pk for p in query) == sorted(p.pk for p in photos)


def test_an_and_of_keys_on_different_shards_matches_nothing() -> None:
    one, two = owners_on_two_shards()
    Photo.objects.create(owner_id=one)
    with capture_all() as log:
        assert list(Photo.objects.filter(Q(owner_id=one) & Q(owner_id=two))) == []
    assert log.count() == 0


@pytest.mark.parametrize(
    "condition",
    [
        Q(owner_id=1) | Q(caption="x"),  # one branch names no shard
        ~Q(owner_id=1),  # a negation names every shard but one key's rows
        Q(caption="x"),
    ],
    ids=["or-with-an-unrouted-branch", "negated", "no-key"],
)
def test_what_names_no_shard_is_still_refused(condition: Q) -> None:
    with pytest.raises(ShardRoutingError):
        list(Photo.objects.filter(condition))


def test_a_subquery_of_keys_names_no_shard() -> None:
    customers = Customer.objects.on_all_shards().filter(name="x")
    with pytest.raises(ShardRoutingError):
        list(Purchase.objects.filter(customer__in=customers))
