"""The README's `make demo`: both scripts run and show rows on every shard."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_shop_demo_fills_every_shard_and_routes_by_id(tmp_path: Path) -> None:
    out = run("demo.py", tmp_path)
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
