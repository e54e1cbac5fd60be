"""The admin on sharded models, through the test client as a logged-in superuser."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse

from uid_fields import locality

from .testapp.models import Customer, Order, PageView, Purchase, PurchaseLine, Ticket, Workspace

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


@pytest.fixture
def client() -> Client:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    c = Client()
    c.force_login(user)
    return c


def orders_on(alias: str, count: int = 3) -> list[Order]:
    made: list[Order] = []
    while len(made) < count:
        order = Order(note=f"n{len(made)}")
        if order.id_parts is not None and Order._meta.pk.shard_map.database_for(order.id) == alias:
            order.save()
            made.append(order)
    return made


def test_changelist_shows_the_first_shard_by_default_and_switches(client: Client) -> None:
    first = orders_on(settings.SHARDS[0])
    third = orders_on(settings.SHARDS[2])
    url = reverse("admin:testapp_order_changelist")
    page = client.get(url).content.decode()
    assert all(str(o.pk) in page for o in first)
    assert not any(str(o.pk) in page for o in third)
    switched = client.get(url, {"shard": settings.SHARDS[2]}).content.decode()
    assert all(str(o.pk) in switched for o in third)
    assert not any(str(o.pk) in switched for o in first)
    assert "shard_3" in page  # the filter lists every shard


def test_changelist_shows_created_times_and_plain_ids(client: Client) -> None:
    (order,) = orders_on(settings.SHARDS[1], 1)
    with override_settings(USE_THOUSAND_SEPARATOR=True):
        page = client.get(reverse("admin:testapp_order_changelist"), {"shard": settings.SHARDS[1]})
    html = page.content.decode()
    assert str(order.pk) in html
    assert f"{order.pk:,}" not in html
    created = order.id_parts.datetime.strftime("%Y-%m-%d %H:%M:%S")
    assert created in html


def test_created_filter_uses_the_id(client: Client) -> None:
    (order,) = orders_on(settings.SHARDS[0], 1)
    url = reverse("admin:testapp_order_changelist")
    assert str(order.pk) in client.get(url, {"created": "1h"}).content.decode()


def test_change_view_on_a_non_first_shard_shows_parts_and_saves_there(client: Client) -> None:
    (order,) = orders_on(settings.SHARDS[3], 1)
    url = reverse("admin:testapp_order_change", args=[order.pk])
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "uid-parts" in html and "shard_3" in html and "worker" in html
    assert order.id_parts.datetime.isoformat() in html
    response = client.post(url, {"note": "edited"})
    assert response.status_code == 302
    assert Order.objects.using(settings.SHARDS[3]).get(pk=order.pk).note == "edited"


def test_delete_view_deletes_on_the_right_shard(client: Client) -> None:
    (order,) = orders_on(settings.SHARDS[2], 1)
    url = reverse("admin:testapp_order_delete", args=[order.pk])
    assert client.get(url).status_code == 200
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Order.objects.filter(pk=order.pk).exists()


def test_history_view(client: Client) -> None:
    (order,) = orders_on(settings.SHARDS[1], 1)
    assert client.get(reverse("admin:testapp_order_history", args=[order.pk])).status_code == 200


@pytest.mark.parametrize("bad", ["abc", "-1", str(2**63), "1" * 30, "12,345"])
def test_bad_ids_redirect_never_500(client: Client, bad: str) -> None:
    response = client.get(f"/admin/testapp/order/{bad}/change/")
    assert response.status_code in (302, 404)


def test_bad_uuid_redirects(client: Client) -> None:
    response = client.get("/admin/testapp/pageview/not-a-uuid/change/")
    assert response.status_code in (302, 404)
    view = PageView.objects.create(path="/x")
    ok = client.get(reverse("admin:testapp_pageview_change", args=[view.pk]))
    assert ok.status_code == 200 and "pid" in ok.content.decode()


def far_future_view(timestamp_ms: int = (1 << 48) - 1) -> PageView:
    """A page view whose locality UUID decodes past the year 9999 (48 bits of ms reach
    10889): a restored or hand-made row, never one the generator makes."""
    value = locality.compose(counter=7, pid=1, mac=2, timestamp_ms=timestamp_ms)
    return PageView.objects.create(id=value, path="/future")


def test_a_time_past_the_year_9999_shows_as_out_of_range(client: Client) -> None:
    view = far_future_view()
    normal = PageView.objects.create(path="/now")
    for row in (view, normal):
        listing = client.get(reverse("admin:testapp_pageview_changelist"), {"shard": row._state.db})
        assert listing.status_code == 200
        assert str(row.pk) in listing.content.decode()
    html = client.get(
        reverse("admin:testapp_pageview_changelist"), {"shard": view._state.db}
    ).content.decode()
    assert "out of range" in html
    page = client.get(reverse("admin:testapp_pageview_change", args=[view.pk]))
    assert page.status_code == 200
    panel = page.content.decode()
    assert "uid-parts" in panel and "out of range" in panel
    assert "<th>pid</th><td>1</td>" in panel  # the other parts are still shown


def test_the_last_representable_time_survives_a_zone_east_of_utc(client: Client) -> None:
    """9999-12-31T23:59:59.999Z exists in UTC, but not in UTC+14."""
    last = int((datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)).timestamp() * 1000)
    view = far_future_view(last)
    with override_settings(TIME_ZONE="Pacific/Kiritimati"):
        listing = client.get(
            reverse("admin:testapp_pageview_changelist"), {"shard": view._state.db}
        )
        page = client.get(reverse("admin:testapp_pageview_change", args=[view.pk]))
    assert listing.status_code == 200 and page.status_code == 200
    assert "9999-12-31 23:59:59.999" in listing.content.decode()
    assert "9999-12-31T23:59:59.999000+00:00" in page.content.decode()


def test_inlines_of_co_located_models(client: Client) -> None:
    customer = Customer.objects.create(name="c")
    purchase = Purchase.objects.create(customer=customer, total=5)
    PurchaseLine.objects.create(purchase=purchase, sku="first")
    url = reverse("admin:testapp_purchase_change", args=[purchase.pk])
    html = client.get(url).content.decode()
    assert "first" in html
    line = purchase.lines.get()
    prefix = "lines"
    data = {
        "customer": str(customer.pk),
        "total": "7",
        f"{prefix}-TOTAL_FORMS": "2",
        f"{prefix}-INITIAL_FORMS": "1",
        f"{prefix}-0-id": str(line.pk),
        f"{prefix}-0-purchase": str(purchase.pk),
        f"{prefix}-0-sku": "renamed",
        f"{prefix}-1-purchase": str(purchase.pk),
        f"{prefix}-1-sku": "added",
        "remarks-TOTAL_FORMS": "0",  # the follower inline (tests/django/test_followers.py)
        "remarks-INITIAL_FORMS": "0",
    }
    response = client.post(url, data)
    assert response.status_code == 302, re.findall(
        r'class="errorlist[^"]*">(.*?)</ul>', response.content.decode()
    )
    alias = purchase._state.db
    assert sorted(PurchaseLine.objects.using(alias).values_list("sku", flat=True)) == [
        "added",
        "renamed",
    ]
    assert Purchase.objects.using(alias).get(pk=purchase.pk).total == 7


def _customers(count: int = 12) -> list[Customer]:
    made = [Customer.objects.create(name=f"c{i}") for i in range(count)]
    assert len({c._state.db for c in made}) > 1
    return made


def test_the_add_view_offers_the_customers_of_every_shard(client: Client) -> None:
    customers = _customers()
    response = client.get(reverse("admin:testapp_purchase_add"))
    assert response.status_code == 200
    html = response.content.decode()
    assert all(f'value="{c.pk}"' in html for c in customers)


def test_the_add_view_keeps_the_shard_the_changelist_was_filtered_to(client: Client) -> None:
    customers = _customers()
    shard = customers[0]._state.db
    url = reverse("admin:testapp_purchase_add") + f"?_changelist_filters=shard%3D{shard}"
    html = client.get(url).content.decode()
    for customer in customers:
        assert (f'value="{customer.pk}"' in html) == (customer._state.db == shard)


def test_an_ordinary_model_with_a_key_to_a_sharded_one_in_the_admin(client: Client) -> None:
    customer = _customers()[-1]
    assert client.get(reverse("admin:testapp_note_add")).status_code == 200
    response = client.post(
        reverse("admin:testapp_note_add"), {"customer": str(customer.pk), "text": "vip"}
    )
    assert response.status_code == 302
    from .testapp.models import Note

    note = Note.objects.get(text="vip")
    change = client.get(reverse("admin:testapp_note_change", args=[note.pk]))
    assert change.status_code == 200
    assert f"Customer object ({customer.pk})" in change.content.decode()  # label from its shard


def test_autocomplete_finds_rows_on_every_shard(client: Client) -> None:
    orders = [Order.objects.create(note=f"find me {i}") for i in range(12)]
    assert len({o._state.db for o in orders}) > 1
    response = client.get(
        "/admin/autocomplete/",
        {"app_label": "testapp", "model_name": "review", "field_name": "order", "term": "find"},
    )
    assert response.status_code == 200
    found = {int(r["id"]) for r in response.json()["results"]}
    assert found == {o.pk for o in orders}


# -- every shard at once: date_hierarchy, list_filter on a plain field, facets, counts ----


def _tickets() -> list[Ticket]:
    """Tickets of workspaces on several shards: reporters and months each on several."""
    spaces = [Workspace.objects.create(slug=f"space{i}") for i in range(16)]  # >= 3 shards
    assert len({s._state.db for s in spaces}) >= 3
    made = []
    for i, space in enumerate(spaces):
        for j in range(3):
            made.append(
                Ticket.objects.create(
                    workspace=space,
                    number=i * 3 + j,
                    reporter=["ann", "bob"][(i + j) % 2],
                    title=f"ticket {i}-{j}" + (" urgent" if j == 0 else ""),
                    open=j != 2,
                    due=date(2024 + i % 2, 1 + (i + j) % 3, 10 + j),
                )
            )
    for reporter in ("ann", "bob"):
        assert len({t._state.db for t in made if t.reporter == reporter}) >= 2
    return made


def _changelist(client: Client, **params: str) -> str:
    response = client.get(
        reverse("admin:testapp_ticket_changelist"), {"shard": "__all__", **params}
    )
    assert response.status_code == 200, response.content.decode()[:2000]
    return response.content.decode()


def _result_count(html: str) -> int:
    found = re.search(r'<span class="small quiet">(\d+) results? \(<a', html) or re.search(
        r"(\d+) tickets?\s*</", html
    )
    assert found is not None, "no result count on the page"
    return int(found.group(1))


def test_all_shards_changelist_with_date_hierarchy_filters_and_facets(client: Client) -> None:
    tickets = _tickets()
    html = _changelist(client)
    assert _result_count(html) == len(tickets)
    # date_hierarchy over every shard: the years (dates() merged), then a drill-down
    assert "?due__year=2024" in html.replace("amp;", "") or "due__year=2024" in html
    assert "due__year=2025" in html
    year = _changelist(client, due__year="2024")
    in_2024 = [t for t in tickets if t.due.year == 2024]
    assert _result_count(year) == len(in_2024)
    for month in sorted({t.due.month for t in in_2024}):
        assert f"due__month={month}" in year
    month = _changelist(client, due__year="2024", due__month="2")
    expected = [t for t in in_2024 if t.due.month == 2]
    assert _result_count(month) == len(expected)
    # list_filter on a plain field (AllValuesFieldListFilter: distinct values of every shard)
    assert "reporter=ann" in html and "reporter=bob" in html
    bob = _changelist(client, reporter="bob")
    assert _result_count(bob) == sum(1 for t in tickets if t.reporter == "bob")
    # facets: counts per choice over every shard (aggregate(Count(..., filter=Q(...))))
    faceted = _changelist(client, _facets="True")
    for reporter in ("ann", "bob"):
        count = sum(1 for t in tickets if t.reporter == reporter)
        assert re.search(rf"reporter={reporter}[^>]*>\s*{reporter} \({count}\)", faceted), reporter
    opened = sum(1 for t in tickets if t.open)
    assert re.search(rf"open__exact=1[^>]*>\s*Yes \({opened}\)", faceted)
    # a search (every shard), its count and the full result count
    found = _changelist(client, q="urgent")
    urgent = [t for t in tickets if "urgent" in (t.title or "")]
    assert _result_count(found) == len(urgent)
    assert f"{len(tickets)} total" in found
    searched_facets = _changelist(client, q="urgent", _facets="True", due__year="2025")
    urgent_2025 = [t for t in urgent if t.due.year == 2025]
    assert _result_count(searched_facets) == len(urgent_2025)
