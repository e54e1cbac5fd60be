"""Keyset pages over shards (DRF's ``KeysetPagination``): each shard is asked for one
page's rows past the key, never an OFFSET; walking the pages gives every row once in one
database's order; a bad cursor is a 404. A deep OFFSET in a fan-out warns once."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework import generics
from rest_framework.pagination import PageNumberPagination
from rest_framework.test import APIRequestFactory

from tests.django.testapp.api import OrderSerializer, PublicOrderSerializer
from tests.django.testapp.models import Order
from uid_fields.django import DeepOffsetWarning
from uid_fields.django.rest import KeysetPagination
from uid_fields.ops import pages, parallel

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

ROWS = 23
SIZE = 4


class OrderPages(KeysetPagination):
    page_size = SIZE


class OldestFirst(OrderPages):
    ordering = "pk"


class OrderList(generics.ListAPIView):  # type: ignore[type-arg]
    serializer_class = OrderSerializer
    pagination_class = OrderPages

    def get_queryset(self) -> Any:
        return Order.objects.on_all_shards()


class OldestFirstList(OrderList):
    pagination_class = OldestFirst


class NumberedPages(PageNumberPagination):
    page_size = SIZE


class NumberedList(OrderList):
    pagination_class = NumberedPages


def get(view: Any, url: str) -> Any:
    return view.as_view()(APIRequestFactory().get(url))


@pytest.fixture
def orders() -> list[int]:
    made = [Order.objects.create(note=f"n{i}") for i in range(ROWS)]
    assert len({o._state.db for o in made}) > 1  # spread over several shards
    return [o.pk for o in made]


@pytest.fixture
def sequential() -> Iterator[None]:
    """Shard queries on this thread, where CaptureQueriesContext sees them."""
    before = parallel.workers()
    parallel.set_workers(0)
    yield
    parallel.set_workers(before)


def walk(view: Any, url: str) -> list[Any]:
    responses = []
    while url:
        response = get(view, url)
        assert response.status_code == 200, response.data
        responses.append(response)
        url = response.data["next"]
    return responses


@pytest.mark.parametrize(("view", "descending"), [(OrderList, True), (OldestFirstList, False)])
def test_walking_the_pages_gives_every_row_once_in_one_databases_order(
    orders: list[int], view: Any, descending: bool
) -> None:
    responses = walk(view, "/orders/")
    seen = [int(row["id"]) for r in responses for row in r.data["results"]]
    assert seen == sorted(orders, reverse=descending)
    assert len(responses) == -(-ROWS // SIZE)
    assert responses[0].data["previous"] is None and responses[-1].data["next"] is None
    # and back, through the previous links: the same pages
    back = []
    url = responses[-1].data["previous"]
    while url:
        response = get(view, url)
        back.append([row["id"] for row in response.data["results"]])
        url = response.data["previous"]
    assert back == [[row["id"] for row in r.data["results"]] for r in responses[-2::-1]]


def test_each_shard_is_asked_for_one_page_past_the_key_never_an_offset(
    orders: list[int], sequential: None
) -> None:
    first = get(OrderList, "/orders/")
    after = first.data["results"][-1]["id"]
    with ExitStack() as stack:
        captured = {
            alias: stack.enter_context(CaptureQueriesContext(connections[alias]))
            for alias in settings.SHARDS
        }
        response = get(OrderList, f"/orders/?after={after}")
    assert response.status_code == 200
    assert [int(row["id"]) for row in response.data["results"]] == sorted(orders, reverse=True)[
        SIZE : 2 * SIZE
    ]
    for alias, queries in captured.items():
        (query,) = [q["sql"] for q in queries.captured_queries if "SELECT" in q["sql"]]
        assert f"LIMIT {SIZE + 1}" in query, (alias, query)
        assert "OFFSET" not in query, (alias, query)
        assert f"< {after}" in query, (alias, query)


@pytest.mark.parametrize(
    "query",
    [
        "after=abc",
        "after=",
        "after=-1",
        "after=99999999999999999999999999",
        "before=1.5",
        "after=1&before=2",
        "after=%2012",  # " 12": int() takes it, the core's rule (SQLAlchemy's too) does not
        "after=%EF%BC%91%EF%BC%92",  # fullwidth digits, likewise
    ],
)
def test_a_bad_cursor_is_a_404(orders: list[int], query: str) -> None:
    assert get(OrderList, f"/orders/?{query}").status_code == 404


def _deep_offset_warnings(url: str, view: Any = OrderList) -> list[Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert get(view, url).status_code == 200
    return [w for w in caught if issubclass(w.category, DeepOffsetWarning)]


def test_a_deep_offset_in_a_fan_out_warns_once(orders: list[int]) -> None:
    """With DEBUG off too (as here, and in production): the core's rule, as SQLAlchemy's
    (tests/django/test_rules_decided_once.py)."""
    pages.forget_deep_offsets()
    limits = {**settings.UID_FIELDS, "FAN_OUT_OFFSET_WARNING": SIZE}
    try:
        with override_settings(UID_FIELDS=limits):
            assert _deep_offset_warnings("/orders/?page=2", NumberedList) == []  # offset 4
            (warned,) = _deep_offset_warnings("/orders/?page=3", NumberedList)  # offset 8
            assert "OFFSET 8" in str(warned.message)
            assert "KeysetPagination" in str(warned.message)
            assert _deep_offset_warnings("/orders/?page=4", NumberedList) == []  # once
            assert _deep_offset_warnings("/orders/?after=1") == []  # keyset: no offset
        pages.forget_deep_offsets()
        with override_settings(UID_FIELDS={**settings.UID_FIELDS, "FAN_OUT_OFFSET_WARNING": None}):
            assert _deep_offset_warnings("/orders/?page=3", NumberedList) == []  # never
        pages.forget_deep_offsets()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert len(Order.objects.on_all_shards()[8:12]) == 4  # default: 1000
        assert caught == []
    finally:
        pages.forget_deep_offsets()


class SizedPages(KeysetPagination):
    page_size = SIZE
    page_size_query_param = "size"
    max_page_size = 6


class SizedList(OrderList):
    pagination_class = SizedPages


@pytest.mark.parametrize(("size", "rows"), [("2", 2), ("50", 6), ("0", SIZE), ("x", SIZE)])
def test_the_page_size_parameter(orders: list[int], size: str, rows: int) -> None:
    response = get(SizedList, f"/orders/?size={size}")
    assert len(response.data["results"]) == rows
    assert f"size={size}" in response.data["next"]  # kept in the links


class PublicOrderList(OrderList):
    serializer_class = PublicOrderSerializer


def test_under_public_ids_the_links_carry_tokens_and_a_raw_id_is_refused(
    orders: list[int],
) -> None:
    """With ``Meta.public_ids = True`` the results show tokens, and so do the links: no
    page link names a stored id (before: ``?after=<stored id>``), and a raw id in
    ``?after=`` is refused (before: accepted, so bisection recovered stored ids)."""
    codec = Order._meta.pk.public_ids  # type: ignore[attr-defined]
    responses = walk(PublicOrderList, "/orders/")
    seen = [codec.decode(row["id"]) for r in responses for row in r.data["results"]]
    assert seen == sorted(orders, reverse=True)
    links = [r.data[k] for r in responses for k in ("next", "previous") if r.data[k]]
    assert links and all(str(pk) not in link for link in links for pk in orders)
    assert all(("after=ord_" in link) or ("before=ord_" in link) for link in links)
    for raw in [orders[5], orders[5] + 1, 0]:
        assert get(PublicOrderList, f"/orders/?after={raw}").status_code == 404
        assert get(PublicOrderList, f"/orders/?before={raw}").status_code == 404
    middle = codec.encode(sorted(orders, reverse=True)[3])
    page = get(PublicOrderList, f"/orders/?after={middle}")
    assert [codec.decode(r["id"]) for r in page.data["results"]] == sorted(orders, reverse=True)[
        4:8
    ]
