"""Filters, orderings and values through a relation to another database.

Before, ``filter(board__name="x")`` on cards was a JOIN on the card's shard (another
shard's boards, or none: silently wrong rows) and ``filter(created_by__username="bob")``
a JOIN to a table the shard lacks ("no such table: auth_user"). Now a filter through
such a key is rewritten into ``board_id IN (ids read where the boards live)``, the ids
read each time the query runs (a queryset built once, a view's class attribute, sees
current rows; building it runs no query); what cannot be rewritten exactly (exclude,
NULL tests, order_by/values/annotate/F through it) is refused before running with
``CrossDatabaseRelationError``. Co-located relations stay JOINs.
"""

from __future__ import annotations

import copy
import pickle

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.db.models import Count, F, Q

from tests.django.helpers import capture_all
from tests.django.test_cross_database_joins import board_and_card
from tests.django.testapp.models import Card, CardCover, CardStep, Project, Task, Tenant
from uid_fields import CrossDatabaseRelationError

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def test_filter_through_a_soft_key_to_another_shard_finds_the_card() -> None:
    board, card = board_and_card()
    board.name = "apart"
    board.save()
    assert list(Card.objects.on_all_shards().filter(board__name="apart")) == [card]
    assert list(Card.objects.on_all_shards().filter(Q(board__name__startswith="ap"))) == [card]
    assert list(Card.objects.on_all_shards().filter(board__name="other")) == []


def test_filter_through_a_key_to_auth_user_reads_default() -> None:
    bob = User.objects.create(username="bob")
    _, card = board_and_card(created_by=bob)
    board_and_card()  # another user's card
    assert list(Card.objects.on_all_shards().filter(created_by__username="bob")) == [card]
    found = Card.objects.on_all_shards().filter(
        Q(created_by__username__startswith="b") | Q(title="none")
    )
    assert list(found) == [card]


def test_null_keys_are_not_matched_as_the_join_would_not() -> None:
    _, card = board_and_card(coupon=None)
    assert list(Card.objects.on_all_shards().filter(coupon__code="x")) == []
    with pytest.raises(CrossDatabaseRelationError, match="coupon"):
        list(Card.objects.on_all_shards().filter(coupon__code__isnull=True))
    assert list(Card.objects.on_all_shards().filter(coupon__isnull=True)) == [
        card
    ]  # the key itself


def test_a_reverse_one_to_one_on_other_shards_is_read_from_every_shard() -> None:
    _, card = board_and_card()
    _, other = board_and_card()
    CardCover.objects.create(card=card, color="red")
    CardCover.objects.create(card=other, color="blue")
    assert list(Card.objects.on_all_shards().filter(cover__color="red")) == [card]


@pytest.mark.parametrize(
    "build",
    [
        lambda: Card.objects.on_all_shards().exclude(board__name="x"),
        lambda: Card.objects.on_all_shards().filter(~Q(created_by__username="bob")),
        lambda: Card.objects.on_all_shards().order_by("created_by__username"),
        lambda: Card.objects.on_all_shards().order_by("-board__name"),
        lambda: Card.objects.on_all_shards().values("board__name"),
        lambda: Card.objects.on_all_shards().values_list("created_by__username"),
        lambda: Card.objects.on_all_shards().annotate(n=F("board__name")),
        lambda: Card.objects.on_all_shards().annotate(n=Count("created_by__groups")),
        lambda: Card.objects.on_all_shards().filter(title=F("created_by__username")),
        lambda: Card.objects.using("shard_0").order_by("created_by__username"),
        lambda: Card.objects.using("shard_1").order_by("board__name"),
        lambda: Card.objects.using("shard_0").values("board__name"),
        lambda: Card.objects.using("shard_1").annotate(n=Count("board__name")),
        lambda: Card.objects.using("shard_0").exclude(created_by__username="bob"),
        lambda: Card.objects.using("shard_0").distinct("board__name"),
        lambda: Card.objects.on_all_shards().filter(cover__isnull=True),
    ],
)
def test_what_cannot_be_rewritten_is_refused_before_running(build: object) -> None:
    board_and_card()
    with capture_all() as log, pytest.raises(CrossDatabaseRelationError) as raised:
        list(build())  # type: ignore[operator]
    assert "Card" in str(raised.value) and "filter by the key" in str(raised.value)
    assert log.count() == 0, {a: log.sql(a) for a in log.aliases()}


def test_aggregate_through_another_database_is_refused() -> None:
    with pytest.raises(CrossDatabaseRelationError, match="aggregate"):
        Card.objects.on_all_shards().aggregate(n=Count("board__name"))
    with pytest.raises(CrossDatabaseRelationError, match="aggregate"):
        Card.objects.using("shard_0").aggregate(n=Count("created_by__username"))


def test_filter_on_one_shard_through_another_shard() -> None:
    _, card = board_and_card()
    alias = Card._meta.pk.placement.database_of(card.pk)
    assert list(Card.objects.using(alias).filter(board__name="b")) == [card]


def test_a_deeper_path_is_judged_again_from_the_related_model() -> None:
    bob = User.objects.create(username="bob")
    board, card = board_and_card()
    board.owner = bob
    board.save()
    assert list(Card.objects.on_all_shards().filter(board__owner__username="bob")) == [card]
    assert list(Card.objects.on_all_shards().filter(board__owner__username="x")) == []


def test_colocated_relations_stay_joins() -> None:
    _, card = board_and_card(apart=False)
    CardStep.objects.create(card=card, label="one")
    query = CardStep.objects.filter(card__title="t", card=card)
    assert str(query.query).count("JOIN") == 1
    assert [s.label for s in query.order_by("card__title")] == ["one"]


def test_more_keys_than_the_database_takes_is_refused_not_a_database_error() -> None:
    limit = connections["shard_0"].features.max_query_params
    User.objects.bulk_create([User(username=f"bulk{i}") for i in range(1000)])
    query = Card.objects.on_all_shards().filter(created_by__username__startswith="bulk")
    if limit is not None and limit < 1000:
        with pytest.raises(CrossDatabaseRelationError, match="1000 related rows"):
            list(query)  # the keys are read when the query runs
    else:
        assert list(query) == []


def test_family_keys_with_constraints_stay_joins() -> None:
    query = Task.objects.using("shard_0").filter(tenant__name="x", project__name="y")
    assert str(query.order_by("project__name").query).count("JOIN") == 2
    assert list(query) == []
    bob = User.objects.create(username="bob")
    tenant = Tenant.objects.create(name="t")
    project = Project.objects.create(tenant=tenant, name="p")
    task = Task.objects.create(project=project, tenant=tenant, title="x", created_by=bob)
    Task.objects.create(project=project, tenant=tenant, title="y")  # created_by NULL
    found = Task.objects.on_all_shards().filter(tenant__name="t", created_by__username="bob")
    assert list(found) == [task]


def test_building_a_filter_through_another_database_runs_no_query() -> None:
    board_and_card()
    with capture_all() as log:
        Card.objects.on_all_shards().filter(board__name="b")
        Card.objects.on_all_shards().filter(Q(created_by__username="bob") | Q(title="t"))
        Card.objects.using("shard_0").filter(board__owner__username="bob")
        Card.objects.on_all_shards().filter(cover__color="red")
    assert log.count() == 0, {a: log.sql(a) for a in log.aliases()}


def test_a_query_built_once_reads_the_related_keys_each_time_it_runs() -> None:
    board, card = board_and_card()
    alias = Card._meta.pk.placement.database_of(card.pk)
    # built once, as a view's class attribute or a module-level queryset is
    fanned = Card.objects.on_all_shards().filter(board__name="later")
    one_shard = Card.objects.using(alias).filter(board__name="later")
    either = Card.objects.on_all_shards().filter(Q(board__name="later") | Q(title="none"))
    by_user = Card.objects.on_all_shards().filter(created_by__username="carol")
    for query in (fanned, one_shard, either):
        assert list(query.all()) == [] and query.count() == 0 and not query.exists()
    board.name = "later"
    board.save()
    for query in (fanned, one_shard, either):
        assert list(query.all()) == [card]
        assert query.count() == 1 and query.exists()
        assert list(query.all().iterator()) == [card]
        assert list(query.all()[:1]) == [card]
        assert list(copy.deepcopy(query)) == [card]
    carol = User.objects.create(username="carol")
    assert list(by_user.all()) == []
    _, hers = board_and_card(created_by=carol)
    assert list(by_user.all()) == [hers] and by_user.count() == 1
    board.name = "renamed"
    board.save()
    assert list(fanned.all()) == [] and fanned.count() == 0
    assert list(one_shard.all()) == [] and list(either.all()) == []


def test_a_pickled_query_reads_the_keys_when_it_runs() -> None:
    board, card = board_and_card()
    built = Card.objects.on_all_shards().filter(board__name="later")
    restored = Card.objects.on_all_shards()
    restored.query = pickle.loads(pickle.dumps(built.query))
    board.name = "later"
    board.save()
    assert list(restored) == [card]
