"""The admin's changelists on rows whose keys reach other databases, and its search
(issue 25, items 1, 3 and 13), through the test client as a logged-in superuser."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from .testapp.models import Board, Card, CardStep, Coupon, Memo

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


@pytest.fixture
def admin_user() -> User:
    return User.objects.create_superuser("admin", "admin@example.com", "pw")


@pytest.fixture
def client(admin_user: User) -> Client:
    c = Client()
    c.force_login(admin_user)
    return c


def board_on(alias: str, name: str, **fields: Any) -> Board:
    for _ in range(500):
        board = Board(name=name, **fields)
        if Board._meta.pk.placement.database_of(board.pk) == alias:
            board.save()
            return board
    raise AssertionError(f"no board id on {alias}")


def card_on(alias: str, board: Board, user: User, title: str = "card") -> Card:
    for _ in range(500):
        card = Card(board=board, created_by=user, title=title)
        if Card._meta.pk.placement.database_of(card.pk) == alias:
            card.save()
            return card
    raise AssertionError(f"no card id on {alias}")


def changelist(client: Client, model: str, **params: str) -> Any:
    response = client.get(reverse(f"admin:testapp_{model}_changelist"), params)
    assert response.status_code == 200
    return response.context["cl"]


def test_a_card_whose_board_is_on_another_shard_is_listed(client: Client, admin_user: User) -> None:
    first, third = settings.SHARDS[0], settings.SHARDS[2]
    board = board_on(third, "far board")
    coupon = Coupon.objects.create(code="C1")
    card = card_on(first, board, admin_user, "far card")
    Card.objects.filter(pk=card.pk).update(coupon=coupon)
    cl = changelist(client, "card", shard=first)
    assert cl.result_count == 1
    assert [c.pk for c in cl.result_list] == [card.pk]  # was 0 rows under "1 card"
    html = client.get(reverse("admin:testapp_card_changelist"), {"shard": first}).content.decode()
    assert "far board" in html and "admin" in html and str(coupon) in html


def test_the_key_to_auth_user_in_list_display_is_no_500(client: Client, admin_user: User) -> None:
    alias = settings.SHARDS[1]
    card = card_on(alias, board_on(alias, "near"), admin_user)
    cl = changelist(client, "card", shard=alias)
    (row,) = cl.result_list
    assert row.pk == card.pk and row.created_by.username == "admin"


def test_a_nullable_key_to_default_joined_by_the_changelist(
    client: Client, admin_user: User
) -> None:
    alias = settings.SHARDS[0]
    owned = board_on(alias, "owned", owner=admin_user)
    unowned = board_on(alias, "unowned")
    cl = changelist(client, "board", shard=alias)
    rows = {b.pk: b for b in cl.result_list}
    assert set(rows) == {owned.pk, unowned.pk}
    assert rows[owned.pk].owner.username == "admin" and rows[unowned.pk].owner is None


# -- search (item 13) ------------------------------------------------------------------------
def test_search_reads_every_shard(client: Client) -> None:
    boards = [board_on(alias, f"Board {i}") for i, alias in enumerate(settings.SHARDS)]
    wanted = boards[2]  # on a shard the default view does not show
    cl = changelist(client, "board", q="Board 2")
    assert [b.pk for b in cl.result_list] == [wanted.pk]  # was "0 results (1 total)"
    assert cl.result_count == 1
    assert cl.full_result_count == len(boards)  # the total counts every shard too
    html = client.get(reverse("admin:testapp_board_changelist"), {"q": "Board"}).content
    assert all(str(b.pk).encode() in html for b in boards)


def test_search_on_a_chosen_shard_stays_there_and_offers_every_shard(client: Client) -> None:
    near = board_on(settings.SHARDS[0], "Board near")
    board_on(settings.SHARDS[3], "Board far")
    url = reverse("admin:testapp_board_changelist")
    response = client.get(url, {"q": "Board", "shard": settings.SHARDS[0]})
    cl = response.context["cl"]
    assert [b.pk for b in cl.result_list] == [near.pk]
    html = response.content.decode()
    assert "All shards" in html and "shard=__all__" in html


def test_every_shard_on_one_changelist(client: Client) -> None:
    boards = [board_on(alias, f"b{i}") for i, alias in enumerate(settings.SHARDS)]
    cl = changelist(client, "board", shard="__all__")
    assert sorted(b.pk for b in cl.result_list) == sorted(b.pk for b in boards)
    assert cl.result_count == cl.full_result_count == len(boards)


def test_without_a_search_the_first_shard_is_still_the_default(client: Client) -> None:
    boards = [board_on(alias, f"b{i}") for i, alias in enumerate(settings.SHARDS)]
    cl = changelist(client, "board")
    assert [b.pk for b in cl.result_list] == [boards[0].pk]


def test_every_shard_ignores_a_sort_the_merge_cannot_repeat(
    client: Client, admin_user: User
) -> None:
    """Sorted by a related column on one shard, then "All shards": the sort is dropped
    (the merge of the shards' rows could not repeat it), not a 500."""
    steps = []
    for i, alias in enumerate(settings.SHARDS):
        card = card_on(alias, board_on(alias, "b"), admin_user, f"card {9 - i}")
        steps.append(CardStep.objects.create(card=card, label=f"s{i}"))
    column = "4"  # action_checkbox, id_text, created, label, card_title
    one = changelist(client, "cardstep", shard=settings.SHARDS[0], o=column)
    assert [s.pk for s in one.result_list] == [steps[0].pk]
    every = changelist(client, "cardstep", shard="__all__", o=column)
    assert sorted(s.pk for s in every.result_list) == sorted(s.pk for s in steps)
    html = client.get(reverse("admin:testapp_cardstep_changelist"), {"shard": "__all__"})
    assert "sortable column-card_title" not in html.content.decode()
    one_html = client.get(reverse("admin:testapp_cardstep_changelist")).content.decode()
    assert "sortable column-card_title" in one_html


def test_an_ordinary_models_changelist_with_a_key_to_sharded_rows(client: Client) -> None:
    boards = [board_on(alias, f"board {alias}") for alias in settings.SHARDS]
    memos = [Memo.objects.create(board=b, text=f"memo {i}") for i, b in enumerate(boards)]
    cl = changelist(client, "memo")
    assert sorted(m.pk for m in cl.result_list) == sorted(m.pk for m in memos)
    html = client.get(reverse("admin:testapp_memo_changelist")).content.decode()
    assert all(f"board {alias}" in html for alias in settings.SHARDS)
