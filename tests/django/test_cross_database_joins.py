"""``select_related`` never joins across databases (issue 25, items 1 and 3).

A join runs only when both sides live on one database by construction (a co-located
child and its parent, an ordinary model read from the query's own database). Every other
relation ``select_related`` names is loaded from its own database after the rows: grouped
per database, one query each, with the related object cache set so that ``card.board``
runs no query. Before, the join ran on the card's shard: a board on another shard hid
the card (an INNER JOIN), and a key to ``auth.User`` raised "no such table: auth_user".
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connections

from tests.django.helpers import capture_all
from tests.django.testapp.models import (
    Board,
    Card,
    CardCover,
    CardStep,
    Coupon,
    Customer,
    Memo,
    Purchase,
    PurchaseLine,
    Review,
)

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def board_and_card(*, apart: bool = True, **card: object) -> tuple[Board, Card]:
    """A board and a card of it, on different shards (or on the same one)."""
    user = card.pop("created_by", None) or User.objects.create(username=f"u{User.objects.count()}")
    for _ in range(200):
        board = Board(name="b")
        made = Card(board=board, created_by=user, title="t", **card)
        board_db = Board._meta.pk.placement.database_of(board.pk)
        card_db = Card._meta.pk.placement.database_of(made.pk)
        if (board_db != card_db) == apart:
            board.save()
            made.board = board
            made.save()
            return board, made
    raise AssertionError("no ids on the wanted shards")


def no_queries_for(card: Card, *names: str) -> None:
    """Reading the named relations of a loaded card runs no query anywhere."""
    with capture_all() as log:
        for name in names:
            getattr(card, name)
    assert log.count() == 0, {a: log.sql(a) for a in log.aliases()}


def test_a_soft_key_to_another_shard_keeps_the_row() -> None:
    board, card = board_and_card()
    query = Card.objects.filter(pk=card.pk).select_related("board")
    assert query.count() == 1
    rows = list(query)
    assert [c.pk for c in rows] == [card.pk]  # the INNER JOIN on the card's shard hid it
    no_queries_for(rows[0], "board")
    assert rows[0].board.pk == board.pk and rows[0].board._state.db == board._state.db


def test_the_key_to_auth_user_is_read_from_default() -> None:
    _board, card = board_and_card()
    loaded = Card.objects.select_related("created_by").get(pk=card.pk)
    no_queries_for(loaded, "created_by")
    assert loaded.created_by.username == card.created_by.username
    assert loaded.created_by._state.db == "default"


def test_a_nullable_key_to_a_model_on_default() -> None:
    coupon = Coupon.objects.create(code="SAVE")
    _board, with_coupon = board_and_card(coupon=coupon)
    _board, without = board_and_card()
    rows = {
        c.pk: c
        for c in Card.objects.filter(pk__in=[with_coupon.pk, without.pk]).select_related("coupon")
    }
    assert set(rows) == {with_coupon.pk, without.pk}
    no_queries_for(rows[with_coupon.pk], "coupon")
    no_queries_for(rows[without.pk], "coupon")
    assert rows[with_coupon.pk].coupon.code == "SAVE"
    assert rows[without.pk].coupon is None


def test_select_related_without_names_follows_every_non_null_key() -> None:
    """What the admin's changelist asks for a key in ``list_display``."""
    board, card = board_and_card()
    (loaded,) = Card.objects.filter(pk=card.pk).select_related()
    no_queries_for(loaded, "board", "created_by")
    assert loaded.board.name == board.name


def test_one_query_per_database_for_many_rows() -> None:
    boards = [Board.objects.create(name=f"b{i}") for i in range(8)]
    user = User.objects.create(username="many")
    cards = [Card.objects.create(board=b, created_by=user, title="t") for b in boards * 3]
    ids = [c.pk for c in cards]
    with capture_all() as log:
        rows = list(Card.objects.filter(pk__in=ids).select_related("board", "created_by"))
    assert sorted(c.pk for c in rows) == sorted(ids)
    board_dbs = {b._state.db for b in boards}
    # One SELECT of boards on each shard that holds some of them, one of users on default.
    board_selects = [
        alias
        for alias in log.aliases("SELECT")
        for sql in log.sql(alias)
        if "testapp_board" in sql and "testapp_card" not in sql
    ]
    assert sorted(board_selects) == sorted(board_dbs)
    assert sum("auth_user" in sql for sql in log.sql("default")) == 1
    for row in rows:
        no_queries_for(row, "board", "created_by")
        assert row.board.pk == row.board_id


def test_a_fan_out_keeps_every_row_and_its_board() -> None:
    pairs = [board_and_card() for _ in range(4)]
    ids = {card.pk for _board, card in pairs}
    rows = [c for c in Card.objects.on_all_shards().select_related("board") if c.pk in ids]
    assert {c.pk for c in rows} == ids
    for row in rows:
        no_queries_for(row, "board")
        assert row.board.pk == row.board_id
    first_two = list(Card.objects.on_all_shards().filter(pk__in=ids).select_related("board")[:2])
    assert len(first_two) == 2


def test_co_located_relations_are_still_joined() -> None:
    customer = Customer.objects.create(name="c")
    purchase = Purchase.objects.create(customer=customer)
    line = PurchaseLine.objects.create(purchase=purchase, sku="x")
    with capture_all() as log:
        loaded = PurchaseLine.objects.select_related("purchase__customer").get(pk=line.pk)
    assert log.count() == 1  # one joined SELECT on the family's shard
    no_queries_for(loaded, "purchase")
    assert loaded.purchase.customer.name == "c"


def test_a_path_across_several_databases() -> None:
    """Co-located step -> its card (joined), card -> board on another shard (loaded
    there), board -> owner on default (loaded from default)."""
    owner = User.objects.create(username="owner")
    board, card = board_and_card()
    Board.objects.filter(pk=board.pk).update(owner=owner)
    step = CardStep.objects.create(card=card, label="s")
    loaded = CardStep.objects.select_related("card__board__owner", "card__created_by").get(
        pk=step.pk
    )
    with capture_all() as log:
        assert loaded.card.board.owner.username == "owner"
        assert loaded.card.created_by.pk == card.created_by_id
    assert log.count() == 0


def test_a_dangling_soft_key_keeps_the_row() -> None:
    board, card = board_and_card()
    Board.objects.filter(pk=board.pk).delete()
    (loaded,) = Card.objects.filter(pk=card.pk).select_related("board")
    with pytest.raises(Board.DoesNotExist):
        loaded.board  # noqa: B018  (as without select_related: the row is gone)


def test_a_reverse_one_to_one_on_another_shard() -> None:
    _board, card = board_and_card()
    _board, bare = board_and_card()
    for _ in range(200):
        cover = CardCover(card=card, color="red")
        if CardCover._meta.pk.placement.database_of(cover.pk) != card._state.db:
            cover.save()
            break
    rows = {c.pk: c for c in Card.objects.filter(pk__in=[card.pk, bare.pk]).select_related("cover")}
    with capture_all() as log:
        assert rows[card.pk].cover.color == "red"
        with pytest.raises(CardCover.DoesNotExist):
            rows[bare.pk].cover  # noqa: B018
    assert log.count() == 0


def test_an_older_soft_key_model_keeps_its_rows_too() -> None:
    """Reviews point at orders by a soft key (the docs' shape since the first release)."""
    from tests.django.testapp.models import Order

    orders = [Order.objects.create(note=f"o{i}") for i in range(6)]
    reviews = [Review.objects.create(order=o) for o in orders for _ in range(2)]
    ids = [r.pk for r in reviews]
    rows = list(Review.objects.filter(pk__in=ids).select_related("order"))
    assert sorted(r.pk for r in rows) == sorted(ids)
    assert all(r.order.note.startswith("o") for r in rows)


def test_the_shards_have_no_auth_user_table() -> None:
    """The premise of the default-key tests: a join to auth_user on a shard cannot run."""
    shard = Card._meta.pk.shard_map.databases[0]
    tables = connections[shard].introspection.table_names()
    assert "auth_user" not in tables


def test_an_ordinary_model_with_the_sharded_manager_reads_keys_from_their_shards() -> None:
    """A model on ``default`` pointing at sharded rows: the join would look for the
    boards' table on ``default``."""
    boards = [Board.objects.create(name=f"b{i}") for i in range(6)]
    assert len({b._state.db for b in boards}) > 1
    memos = [Memo.objects.create(board=b, text=b.name) for b in boards]
    rows = list(Memo.objects.select_related("board").order_by("pk"))
    assert [m.pk for m in rows] == [m.pk for m in memos]
    for row in rows:
        no_queries_for(row, "board")  # type: ignore[arg-type]
        assert row.board.name == row.text


def test_iterator_loads_per_chunk() -> None:
    pairs = [board_and_card() for _ in range(5)]
    ids = [card.pk for _board, card in pairs]
    rows = list(Card.objects.filter(pk__in=ids).select_related("board").iterator(chunk_size=2))
    assert sorted(c.pk for c in rows) == sorted(ids)
    for row in rows:
        no_queries_for(row, "board")


def test_only_with_a_loaded_relation() -> None:
    board, card = board_and_card()
    (loaded,) = Card.objects.filter(pk=card.pk).select_related("board").only("title", "board__name")
    no_queries_for(loaded, "board")
    assert loaded.board.name == board.name


# -- prefetch_related over relations whose ends live on different shards (issue 34, 4) ---


def test_prefetch_of_a_key_to_another_shard_loads_the_row_where_it_lives() -> None:
    pairs = [board_and_card() for _ in range(4)]
    assert len({b._state.db for b, _ in pairs}) >= 2
    one = Card.objects.filter(pk=pairs[0][1].pk).prefetch_related("board").get()
    no_queries_for(one, "board")
    assert one.board is not None and one.board.pk == pairs[0][0].pk
    rows = {c.pk: c for c in Card.objects.on_all_shards().prefetch_related("board")}
    for board, card in pairs:
        no_queries_for(rows[card.pk], "board")
        assert rows[card.pk].board is not None, "a board that exists came back as None"
        assert rows[card.pk].board.pk == board.pk
        assert rows[card.pk].board._state.db == board._state.db


def test_prefetch_of_the_reverse_side_finds_children_on_every_shard() -> None:
    board, first = board_and_card()
    extra = [
        Card.objects.create(board=board, created_by=first.created_by, title=f"t{i}")
        for i in range(6)
    ]
    assert len({c._state.db for c in [first, *extra]}) >= 2
    (loaded,) = Board.objects.filter(pk=board.pk).prefetch_related("cards")
    with capture_all() as log:
        cards = sorted(c.pk for c in loaded.cards.all())
    assert log.count() == 0
    assert cards == sorted(c.pk for c in [first, *extra])
    fanned = {b.pk: b for b in Board.objects.on_all_shards().prefetch_related("cards")}
    assert sorted(c.pk for c in fanned[board.pk].cards.all()) == cards


def test_prefetch_of_a_reverse_one_to_one_on_another_shard() -> None:
    _board, card = board_and_card()
    for _ in range(200):
        cover = CardCover(card=card, color="red")
        if CardCover._meta.pk.placement.database_of(cover.pk) != card._state.db:
            cover.save()
            break
    loaded = Card.objects.filter(pk=card.pk).prefetch_related("cover").get()
    no_queries_for(loaded, "cover")
    assert loaded.cover.pk == cover.pk
