"""The README's `make demo`: both scripts run and show rows on every shard."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sdist

ROOT = Path(__file__).resolve().parents[1]


def run(script: str, data: Path) -> str:
    env = {**os.environ, "EXAMPLE_DATA_DIR": str(data), "EXAMPLE_DB": "sqlite"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "example_project" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout


def test_core_demo_shows_every_scheme(tmp_path: Path) -> None:
    out = run("core_demo.py", tmp_path)
    for scheme in ("twitter", "instagram", "sonyflake", "discord", "decimal", "locality", "uniqid"):
        assert scheme in out


@pytest.fixture(scope="module")
def shop_demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One run of the shop demo, read by the tests below."""
    return run("demo.py", tmp_path_factory.mktemp("shop"))


def test_shop_demo_fills_every_shard_and_routes_by_id(shop_demo: str) -> None:
    out = shop_demo
    rows = {
        line.split()[0]: [int(n) for n in line.split()[1:]]
        for line in out.splitlines()
        if re.match(r"^(Customer|Order|OrderLine|PageView|sa_\w+)\s+\d", line)
    }
    assert set(rows) >= {"Customer", "Order", "OrderLine", "PageView", "sa_orders"}
    assert all(len(counts) == 4 and min(counts) > 0 for counts in rows.values()), rows
    assert sum(rows["Order"]) == 1000
    assert re.search(r"ran 1 query on \['shard_\d'\]", out)
    assert re.search(r"1 SELECT on \['shard_\d'\]", out)
    assert "shop tables there: none" in out
    assert "orders created since" in out and "(no created_at column)" in out


def test_shop_demo_keeps_a_tenant_family_on_one_shard(shop_demo: str) -> None:
    out = shop_demo
    family = re.search(r"Tenant 0 lives on (shard_\d); its rows: (\{.*\})", out)
    assert family, out
    home = family.group(1)
    assert family.group(2) == str({m: [home] for m in ("Project", "Task", "Comment")})
    assert re.search(r"created_by \w+ \(read from default\)", out)
    refused = re.search(r"slug 'tenant-0' for a new tenant on (shard_\d) refused: (.*)", out)
    assert refused and refused.group(1) != home
    assert "already exists" in refused.group(2)
    deleted = re.search(r"her (\d+) comments on .* deleted \(CASCADE, (\d+) left\)", out)
    assert deleted and int(deleted.group(1)) > 0 and deleted.group(2) == "0"
    assert "tenants.Comment on shard_3: 0 misplaced" in out
