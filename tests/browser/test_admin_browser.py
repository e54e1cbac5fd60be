"""The example shop's admin and API in a real (headless) Chromium, driven by Playwright.

Log in, open the Order changelist, switch shards, open an order from a non-first
shard, check its decoded creation time and parts panel, save an edit, delete one; add
an order, picking its customer with the autocomplete box, and find it on the customer's
shard; read the orders in DRF's browsable API, list and detail.

With ``UID_FIELDS_SCREENSHOTS=1`` the screenshots are written to docs/images (the ones
the docs show); otherwise to the test's temporary directory, so a test run leaves the
checkout as it was.
"""

from __future__ import annotations

import os
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
