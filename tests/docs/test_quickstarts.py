"""The quickstarts of the documentation, run as they are written.

The python code blocks of a page's quickstart section (the section whose heading says
"quickstart", up to the next heading of the same level) are joined into one script and
run in a fresh interpreter, with the temporary directory pointed at pytest's, so the
SQLite shard files the script makes can be checked afterwards.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
_HEADING = re.compile(r"^(#+) (.*)$")
_FENCE = re.compile(r"^```(\w*)")
_BLOCK = re.compile(r"^(`{3,})([^\n]*)\n(.*?)^\1\s*$", re.S | re.M)
_DJANGO_MODEL = re.compile(r"^class \w+\((models\.)?Model\):", re.M)
_APP_LABEL = re.compile(r"app_label = [\"'](\w+)[\"']")


def quickstart_code(page: Path) -> str:
    """The python blocks of the page's quickstart section, in order."""
    blocks: list[str] = []
    level = None  # heading level of the quickstart section once inside it
    fence: str | None = None
    current: list[str] = []
    for line in page.read_text(encoding="utf-8").splitlines():
        if fence is not None:
            if line.startswith("```"):
                if fence == "python" and level is not None:
                    blocks.append("\n".join(current))
                fence, current = None, []
            else:
                current.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            depth = len(heading.group(1))
            if level is not None and depth <= level:
                break
            if level is None and "quickstart" in heading.group(2).lower():
                level = depth
    assert blocks, f"{page.name} has no python blocks in a quickstart section"
    return "\n\n".join(blocks) + "\n"


def python_blocks(page: Path) -> list[str]:
    """Every python block of the page that is not marked ``fragment``, in order."""
    return [
        block.group(3)
        for block in _BLOCK.finditer(page.read_text(encoding="utf-8"))
        if block.group(2).split()[:1] == ["python"] and "fragment" not in block.group(2)
    ]


def model_pages() -> list[Path]:
    """The pages whose runnable code defines Django models."""
    return [
        page
        for page in [*sorted(DOCS.rglob("*.md")), DOCS.parent / "README.md"]
        if any(_DJANGO_MODEL.search(block) for block in python_blocks(page))
    ]


#: Run before a page's code: every app label its models name becomes an installed app
#: (models of an app that is not installed are invisible to the checks), with its
#: migrations written under the script's directory.
_CHECK_PRELUDE = """\
import django.conf
from pathlib import Path as _Path

_LABELS = {labels!r}
(_Path(__file__).parent / "docs_apps.py").write_text(
    "from django.apps import AppConfig\\n"
    + "".join(
        f"class App_{{label}}(AppConfig):\\n    name = 'docs_apps'\\n    label = {{label!r}}\\n"
        for label in _LABELS
    )
)
(_Path(__file__).parent / "docs_migrations").mkdir()
(_Path(__file__).parent / "docs_migrations" / "__init__.py").write_text("")
_configure = django.conf.LazySettings.configure


def _with_the_page_apps(self, default_settings=django.conf.global_settings, **options):
    options["INSTALLED_APPS"] = [
        *options.get("INSTALLED_APPS", []), *(f"docs_apps.App_{{l}}" for l in _LABELS)
    ]
    options["MIGRATION_MODULES"] = {{l: f"docs_migrations.{{l}}" for l in _LABELS}}
    _configure(self, default_settings, **options)


django.conf.LazySettings.configure = _with_the_page_apps
"""

#: Run after a page's last model: the system checks (``manage.py check`` raises on an
#: error), then a migration, and ``makemigrations --check``: the fields deconstruct to
#: what they were built from, so a second run finds nothing to write.
_CHECK_EPILOGUE = """\
import importlib
from django.core.management import call_command

call_command("check", fail_level="ERROR")
call_command("makemigrations", *_LABELS, verbosity=0)
importlib.invalidate_caches()
call_command("makemigrations", *_LABELS, check=True, dry_run=True, verbosity=1)
print("CHECKED")
"""


def run_script(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "quickstart.py"
    script.write_text(code, encoding="utf-8")
    work = tmp_path / "data"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["TMPDIR"] = str(work)  # tempfile.mkdtemp() in the scripts lands here
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"quickstart failed:\n{result.stdout}\n{result.stderr}"
    return result


def rows(database: Path, table: str) -> int:
    with sqlite3.connect(database) as connection:
        return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_extraction_stops_at_the_next_section(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n```python\nbefore = 1\n```\n## Quickstart\n```python\na = 1\n```\n"
        "### Detail\n```bash\nls\n```\n```python\nb = 2\n```\n## Next\n```python\nc = 3\n```\n"
    )
    assert quickstart_code(page) == "a = 1\n\nb = 2\n"


def test_django_quickstart(tmp_path: Path) -> None:
    pytest.importorskip("django")
    code = quickstart_code(DOCS / "quickstart-django.md")
    assert "settings.configure(" in code
    result = run_script(code, tmp_path)
    assert "names no shard" in result.stdout  # the strict-routing refusal was shown
    [data] = (tmp_path / "data").iterdir()
    shards = sorted(data.glob("shard_*.sqlite3"))
    assert len(shards) == 4
    per_shard = {path.stem: rows(path, "shop_order") for path in shards}
    assert sum(per_shard.values()) == 41 and all(per_shard.values()), per_shard
    # Each order sits on its customer's shard: no order points at a missing customer.
    for path in shards:
        with sqlite3.connect(path) as connection:
            orphans = connection.execute(
                "SELECT count(*) FROM shop_order o LEFT JOIN shop_customer c "
                "ON c.id = o.customer_id WHERE c.id IS NULL"
            ).fetchone()[0]
        assert orphans == 0, path.name
    # Nothing sharded was written to default.
    default = data / "default.sqlite3"
    if default.exists():
        with sqlite3.connect(default) as connection:
            tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
        assert "shop_order" not in tables


def test_sqlalchemy_quickstart(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    code = quickstart_code(DOCS / "sqlalchemy.md")
    result = run_script(code, tmp_path)
    [data] = (tmp_path / "data").iterdir()
    files = sorted(data.glob("app_*.db"))
    assert len(files) == 4
    orders = [rows(path, "orders") for path in files]
    assert sum(orders) == 100 and all(orders), orders
    assert sum(rows(path, "items") for path in files) == 2
    assert sorted(rows(path, "photos") for path in files) == [0, 0, 0, 2]  # one owner, one shard
    assert "shard_0" in result.stdout  # the per-file counts it printed


def test_django_model_pages_are_found() -> None:
    assert DOCS / "quickstart-django.md" in model_pages()


@pytest.mark.parametrize("page", model_pages(), ids=lambda page: page.name)
def test_django_models_of_the_docs_pass_check_and_makemigrations(
    page: Path, tmp_path: Path
) -> None:
    """What the quickstart's schema_editor skips: ``manage.py check`` and
    ``makemigrations --check`` over the page's models, as a project would run them."""
    pytest.importorskip("django")
    blocks = python_blocks(page)
    last = max(i for i, block in enumerate(blocks) if _DJANGO_MODEL.search(block))
    code = "\n\n".join(blocks[: last + 1])
    labels = sorted(set(_APP_LABEL.findall(code)))
    assert labels, f"{page.name}: its models name no app_label"
    prelude = _CHECK_PRELUDE.format(labels=labels)
    result = run_script(prelude + "\n" + code + "\n\n" + _CHECK_EPILOGUE, tmp_path)
    assert "CHECKED" in result.stdout
