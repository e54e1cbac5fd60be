"""The example shop's admin and API in a real (headless) Chromium, driven by Playwright.

Log in, open the Order changelist, switch shards, open an order from a non-first
shard, check its decoded creation time and parts panel, save an edit, delete one; add
an order, picking its customer with the autocomplete box, and find it on the customer's
shard; read the orders in DRF's browsable API, list and detail. The tenants app: the
Tenant and Task changelists list every row (created_by read from ``default``), a task is
added and changed with comments in its inline, on its tenant's shard, and the tasks API's
django-filter form lists every shard's tenants.

With ``UID_FIELDS_SCREENSHOTS=1`` the screenshots are written to docs/images (the ones
the docs show); otherwise to the test's temporary directory, so a test run leaves the
checkout as it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uid_fields import INSTAGRAM

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_project"
IMAGES = ROOT / "docs" / "images"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
USER, PASSWORD = "browser", "browser-password"
ORDERS_LAYOUT = INSTAGRAM.replace(epoch_ms=1704067200000)  # the shop's "orders" generator
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    reason = "Chromium is not installed (Debian package 'chromium'); .ci/run installs it"
    if os.environ.get("CI") or os.environ.get("UID_FIELDS_REQUIRE_SERVICES") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, str(EXAMPLE / "manage.py"), *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    _require_chromium()
    data = tmp_path_factory.mktemp("shop")
    env = {
        **os.environ,
        "EXAMPLE_DATA_DIR": str(data),
        "EXAMPLE_DB": "sqlite",
        "DJANGO_SETTINGS_MODULE": "shop.settings",
    }
    _manage(env, "uid_fields", "migrate-all")
    _manage(env, "seed_demo", "--customers", "40", "--orders", "120", "--views", "20")
    _manage(env, "seed_tenants", "--tenants", "8", "--projects", "2", "--tasks", "5")
    _manage(
        env,
        "shell",
        "-c",
        f"from django.contrib.auth.models import User; "
        f"User.objects.create_superuser({USER!r}, 'b@example.com', {PASSWORD!r})",
    )
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE / "manage.py"),
            "runserver",
            f"127.0.0.1:{port}",
            "--noreload",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/admin/login/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the example shop did not start")
        yield base, data
    finally:
        server.terminate()
        server.wait(timeout=10)


def _row(data: Path, alias: str, order_id: int) -> tuple[str] | None:
    with sqlite3.connect(data / f"{alias}.sqlite3") as conn:
        return conn.execute("SELECT note FROM orders_order WHERE id = ?", (order_id,)).fetchone()


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """Where screenshots go: docs/images when asked for, else a temporary directory."""
    folder = IMAGES if os.environ.get("UID_FIELDS_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shard_holding(data: Path, table: str, column: str, value: object) -> list[str]:
    found = []
    for path in sorted(data.glob("shard_*.sqlite3")):
        with sqlite3.connect(path) as conn:
            if conn.execute(f"SELECT 1 FROM {table} WHERE {column} = ?", (value,)).fetchone():
                found.append(path.stem)
    return found


def _login(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", USER)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/")


def test_admin_end_to_end(shop: tuple[str, Path], images: Path) -> None:
    from playwright.sync_api import sync_playwright

    base, data = shop
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        _login(page, base)

        page.goto(f"{base}/admin/orders/order/")
        assert page.locator("#changelist-filter").get_by_text("shard_0").count() >= 1
        first_shard_ids = page.locator("#result_list tbody th a").all_inner_texts()
        assert first_shard_ids
        page.locator("#changelist-filter a", has_text="shard_2").click()
        page.wait_for_url("**shard=shard_2**")
        ids = page.locator("#result_list tbody th a").all_inner_texts()
        assert ids and not set(ids) & set(first_shard_ids)
        assert all("," not in i for i in ids)  # plain digits
        page.screenshot(path=str(images / "admin-changelist.png"))

        order_id = int(ids[0])
        parts = ORDERS_LAYOUT.decompose(order_id)
        created = parts.datetime.strftime("%Y-%m-%d %H:%M:%S")
        assert created in page.locator("#result_list").inner_text()

        page.locator("#result_list tbody th a", has_text=str(order_id)).click()
        page.wait_for_url(f"**/admin/orders/order/{order_id}/change/**")
        panel = page.locator("table.uid-parts").inner_text()
        assert parts.datetime.isoformat() in panel
        assert f"{parts.shard}" in panel and "shard_2" in panel and "sequence" in panel
        page.screenshot(path=str(images / "admin-change.png"), full_page=True)

        page.fill("#id_note", "edited in a browser")
        page.click("input[name=_save]")
        page.wait_for_url(f"{base}/admin/orders/order/**")
        assert _row(data, "shard_2", order_id) == ("edited in a browser",)

        page.goto(f"{base}/admin/orders/order/{order_id}/delete/")
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/orders/order/**")
        assert _row(data, "shard_2", order_id) is None

        page.goto(f"{base}/admin/orders/order/not-an-id/change/")
        assert "doesn" in page.content() or page.url.endswith("/admin/")
        browser.close()


def test_admin_add_with_autocomplete_and_the_browsable_api(
    shop: tuple[str, Path], images: Path
) -> None:
    from playwright.sync_api import sync_playwright

    base, data = shop
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        _login(page, base)

        # Add: the customer comes from the autocomplete box, which searches every shard.
        page.goto(f"{base}/admin/orders/order/add/")
        page.locator(".field-customer .select2-selection").click()
        page.locator(".select2-search__field").fill("Customer 3")
        option = page.locator(".select2-results__option", has_text="Customer 37")
        option.wait_for()
        page.screenshot(path=str(images / "admin-autocomplete.png"))
        option.click()
        page.fill("#id_total_cents", "4200")
        page.fill("#id_note", "added in a browser")
        page.click("input[name=_save]")
        page.wait_for_url(f"{base}/admin/orders/order/**")
        holders = _shard_holding(data, "orders_order", "note", "added in a browser")
        assert len(holders) == 1  # stored once, on one shard
        with sqlite3.connect(data / f"{holders[0]}.sqlite3") as conn:
            order_id, customer_id = conn.execute(
                "SELECT id, customer_id FROM orders_order WHERE note = ?", ("added in a browser",)
            ).fetchone()
        assert _shard_holding(data, "customers_customer", "id", customer_id) == holders
        assert ORDERS_LAYOUT.decompose(order_id).shard is not None

        # Change form of the new order: the parts panel names its shard.
        page.goto(f"{base}/admin/orders/order/{order_id}/change/")
        assert holders[0] in page.locator("table.uid-parts").inner_text()
        assert "Customer 37" in page.locator(".field-customer").inner_text()

        # Delete through the confirmation page: gone from its shard.
        page.goto(f"{base}/admin/orders/order/{order_id}/delete/")
        assert str(order_id) in page.content() or "added in a browser" in page.content()
        page.screenshot(path=str(images / "admin-delete.png"))
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/orders/order/**")
        assert _shard_holding(data, "orders_order", "id", order_id) == []

        # DRF's browsable API: every shard's orders, ids as strings in the JSON.
        page.goto(f"{base}/api/orders/")
        body = page.locator(".response-info").inner_text()
        assert "Order List" in page.content() and '"id": "' in body
        first = body.split('"id": "', 1)[1].split('"', 1)[0]
        assert first.isdigit()
        page.screenshot(path=str(images / "api-list.png"))
        page.goto(f"{base}/api/orders/{first}/")
        detail = page.locator(".response-info").inner_text()
        assert f'"id": "{first}"' in detail
        assert _shard_holding(data, "orders_order", "id", int(first))  # a real row
        page.screenshot(path=str(images / "api-detail.png"))
        page.goto(f"{base}/api/orders/not-an-id/")
        assert "Not found" in page.content() or "404" in page.content()
        browser.close()


def _rows(data: Path, sql: str, *params: object) -> dict[str, list[tuple[Any, ...]]]:
    """The rows a query finds on each shard file, by shard."""
    found = {}
    for path in sorted(data.glob("shard_*.sqlite3")):
        with sqlite3.connect(path) as conn:
            found[path.stem] = conn.execute(sql, params).fetchall()
    return found


def test_tenants_admin_changelists_add_and_change_with_inlines(
    shop: tuple[str, Path], images: Path
) -> None:
    from playwright.sync_api import sync_playwright

    base, data = shop
    tasks = _rows(data, "SELECT id, created_by_id FROM tenants_task")
    tenants = _rows(data, "SELECT name FROM tenants_tenant")
    total_tasks = sum(len(rows) for rows in tasks.values())
    with sqlite3.connect(data / "default.sqlite3") as conn:
        users = dict(conn.execute("SELECT id, username FROM auth_user").fetchall())
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        _login(page, base)

        # Tenant changelist, every shard: every tenant listed once.
        page.goto(f"{base}/admin/tenants/tenant/?shard=__all__")
        names = page.locator("#result_list td.field-name").all_inner_texts()
        assert sorted(names) == sorted(n for rows in tenants.values() for (n,) in rows)

        # Task changelist, shard by shard and all at once: every row, its creator's name
        # read from default (a key in list_display, which Django would join).
        for alias, rows in tasks.items():
            page.goto(f"{base}/admin/tenants/task/?shard={alias}")
            listed = page.locator("#result_list tbody tr").count()
            assert listed == len(rows), (alias, listed, len(rows))
        page.goto(f"{base}/admin/tenants/task/?shard=__all__")
        assert page.locator("#result_list tbody tr").count() == total_tasks
        creators = set(page.locator("#result_list td.field-created_by").all_inner_texts())
        assert creators == {users[u] for rows in tasks.values() for (_, u) in rows}
        page.screenshot(path=str(images / "admin-tenant-tasks.png"))

        # Add: a task under a project (every shard's projects in the select box), with a
        # comment in the inline; both land on the project's tenant's shard.
        page.goto(f"{base}/admin/tenants/task/add/")
        page.select_option("#id_project", label="Tenant 5 project 1")
        page.fill("#id_title", "added in a browser")
        page.fill("#id_comments-0-body", "first comment, inline")
        page.click("input[name=_save]")
        page.wait_for_url(f"{base}/admin/tenants/task/**")
        added = {a: r for a, r in _rows(data, _TASK_SQL, "added in a browser").items() if r}
        assert len(added) == 1, added
        [(home, [(task_id, tenant_name, project_tenant, creator)])] = added.items()
        assert tenant_name == project_tenant == "Tenant 5"
        assert users[creator] == USER
        comments = _rows(
            data, "SELECT body, author_id FROM tenants_comment WHERE task_id = ?", task_id
        )
        assert {a: r for a, r in comments.items() if r} == {
            home: [("first comment, inline", creator)]
        }

        # Change: the inline shows the comment; add a second one and rename the task.
        page.goto(f"{base}/admin/tenants/task/{task_id}/change/")
        assert page.locator("#id_comments-0-body").input_value() == "first comment, inline"
        assert home in page.locator("table.uid-parts").inner_text()
        page.fill("#id_title", "changed in a browser")
        page.fill("#id_comments-1-body", "second comment, inline")
        page.screenshot(path=str(images / "admin-task-inline.png"), full_page=True)
        page.click("input[name=_save]")
        page.wait_for_url(f"{base}/admin/tenants/task/")
        assert _rows(data, "SELECT title FROM tenants_task WHERE id = ?", task_id)[home] == [
            ("changed in a browser",)
        ]
        bodies = _rows(data, "SELECT body FROM tenants_comment WHERE task_id = ?", task_id)
        assert sorted(b for (b,) in bodies[home]) == [
            "first comment, inline",
            "second comment, inline",
        ]
        assert all(not rows for alias, rows in bodies.items() if alias != home)

        # A seeded task with comments, on another shard: its inline lists them.
        other = next(a for a, rows in tasks.items() if rows and a != home)
        with sqlite3.connect(data / f"{other}.sqlite3") as conn:
            seeded, count = conn.execute(
                "SELECT task_id, COUNT(*) FROM tenants_comment GROUP BY task_id LIMIT 1"
            ).fetchone()
        page.goto(f"{base}/admin/tenants/task/{seeded}/change/")
        filled = [page.locator(f"#id_comments-{i}-body").input_value() for i in range(count)]
        assert all(body.startswith("comment on ") for body in filled)

        # The tasks API with django-filter: the filter form lists every shard's tenants,
        # and ?tenant= answers that tenant's tasks.
        tenant_id = _rows(data, "SELECT id FROM tenants_tenant WHERE name = ?", "Tenant 5")[home][
            0
        ][0]
        page.goto(f"{base}/api/tasks/?tenant={tenant_id}&format=json")
        listed = json.loads(page.locator("body").inner_text())
        expected = _rows(data, "SELECT id FROM tenants_task WHERE tenant_id = ?", tenant_id)[home]
        assert sorted(int(t["id"]) for t in listed) == sorted(i for (i,) in expected)
        page.goto(f"{base}/api/tasks/?tenant={tenant_id}")
        page.locator("button", has_text="Filters").click()
        options = page.locator("select[name=tenant] option").all_inner_texts()
        assert {n for rows in tenants.values() for (n,) in rows} <= set(options)
        browser.close()


_TASK_SQL = (
    "SELECT t.id, tn.name, pt.name, t.created_by_id FROM tenants_task t "
    "JOIN tenants_tenant tn ON tn.id = t.tenant_id "
    "JOIN tenants_project p ON p.id = t.project_id "
    "JOIN tenants_tenant pt ON pt.id = p.tenant_id WHERE t.title = ?"
)


def _count(page: Any) -> int:
    """The changelist's count of rows, as its paginator says it ("1 2 120 orders")."""
    text = page.locator("#changelist .paginator").inner_text()
    found = re.search(r"(\d+) orders?\b", text)
    assert found is not None, text
    return int(found.group(1))


def test_all_shards_changelist_with_dates_filters_facets_and_search(
    shop: tuple[str, Path], images: Path
) -> None:
    """The changelist of every shard with what Django's admin runs as GROUP BY, DISTINCT
    and aggregates (issue 34): the date hierarchy (dates() and Min/Max over every shard),
    a filter on a plain field (its distinct values), facets, a search and the full count.
    Every count is checked against the shard files themselves."""
    from playwright.sync_api import sync_playwright

    base, data = shop
    rows = [
        row
        for found in _rows(
            data,
            "SELECT o.channel, o.placed_on, c.name FROM orders_order o "
            "JOIN customers_customer c ON c.id = o.customer_id",
        ).values()
        for row in found
    ]
    by_shard = _rows(data, "SELECT DISTINCT channel FROM orders_order")
    assert sum(1 for found in by_shard.values() if "app" in {c for (c,) in found}) >= 2
    years = sorted({placed[:4] for _, placed, _ in rows})
    assert len(years) >= 2
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        _login(page, base)

        page.goto(f"{base}/admin/orders/order/?shard=__all__")
        assert _count(page) == len(rows)
        hierarchy = page.locator("nav.toplinks")
        assert hierarchy.locator("a").all_inner_texts() == years  # dates() of every shard

        # Drill down: a year, then its first month.
        hierarchy.locator("a", has_text=years[0]).click()
        page.wait_for_url(f"**placed_on__year={years[0]}**")
        in_year = [r for r in rows if r[1].startswith(years[0])]
        assert _count(page) == len(in_year)
        months = sorted({r[1][5:7] for r in in_year})
        links = page.locator("nav.toplinks a")
        assert links.count() == len(months) + 1  # the link back to all dates, and each month
        links.nth(1).click()
        page.wait_for_url("**placed_on__month=**")
        month = [r for r in in_year if r[1][5:7] == months[0]]
        assert _count(page) == len(month)
        listed = page.locator("#result_list td.field-placed_on").all_inner_texts()
        assert len(listed) == min(len(month), 100)

        # The plain field's filter lists every shard's distinct channels; pick one.
        page.goto(f"{base}/admin/orders/order/?shard=__all__")
        filters = page.locator("#changelist-filter")
        for channel in ("web", "app", "phone"):
            assert filters.locator("a", has_text=channel).count() == 1
        filters.locator("a", has_text="app").click()
        page.wait_for_url("**channel=app**")
        app = [r for r in rows if r[0] == "app"]
        assert _count(page) == len(app)

        # Facets: the counts of each choice, over every shard.
        page.goto(f"{base}/admin/orders/order/?shard=__all__&_facets=True")
        facets = page.locator("#changelist-filter").inner_text()
        for channel in ("web", "app", "phone"):
            assert f"{channel} ({sum(1 for r in rows if r[0] == channel)})" in facets
        page.screenshot(path=str(images / "admin-all-shards-facets.png"), full_page=True)
        page.locator("#changelist-filter a", has_text="phone").click()
        page.wait_for_url("**channel=phone**")
        assert _count(page) == sum(1 for r in rows if r[0] == "phone")

        # A search reads every shard; the full result count is every shard's rows.
        page.goto(f"{base}/admin/orders/order/?shard=__all__")
        page.fill("#searchbar", "Customer 3")
        page.locator("#changelist-search input[type=submit]").click()
        page.wait_for_url("**q=Customer**")
        # Django's search: each word in the name (Customer 3, 13, 23, 30 to 39)
        matched = [r for r in rows if all(w in r[2].lower() for w in ("customer", "3"))]
        assert _count(page) == len(matched)
        assert f"{len(rows)} total" in page.locator("#changelist-search").inner_text()
        browser.close()
