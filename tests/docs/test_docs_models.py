"""Every Django model the documentation shows passes ``manage.py check`` and
``makemigrations --check``, fragments included.

A page's fragments are excerpts, not programs (``tests/typecheck/docs_code.py``), but a
model class in one is what a reader copies into ``models.py``: a documented line that
``manage.py check`` refuses (issue 39: ``id_parts = IdParts(SnowflakeParts)`` was E010)
breaks every command of their project. So each block's model classes, with the block's
imports, become the ``models.py`` of an app of their own in a small project (the
generators and the shard map the pages use), and the project runs the system checks
(errors fail; warnings such as W002 are what some pages show on purpose), then
``makemigrations`` and ``makemigrations --check``: the fields deconstruct to what they
were built from.

A model the block names but does not define (``ForeignKey(Customer, ...)``) is taken from
an earlier block of the page, else it is a plain sharded root model. Models that name
an ``app_label`` of their own (the Django quickstart's ``shop``) belong to no app here:
``test_quickstarts.py`` checks those in the page's own project.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: Blocks whose models need what this SQLite project lacks, by page and block number.
NEEDS = {
    ("database-ids.md", 0): "database_default=True needs PostgreSQL shards (E009 on SQLite)",
}

_BLOCK = re.compile(r"^(`{3,})([^\n]*)\n(.*?)^\1\s*$", re.S | re.M)
_MODEL = re.compile(r"^class (\w+)\((?:models\.)?Model\):", re.M)
_IMPORT = re.compile(r"^(?:from \S+ import .+|import \S+)$", re.M)
_RELATED = re.compile(r"models\.(?:ForeignKey|OneToOneField|ManyToManyField)\(\s*(\w+)")

PRELUDE = """\
from django.db import models

from uid_fields import *  # noqa: F403
from uid_fields.django import *  # noqa: F403
"""

SETTINGS = """\
from pathlib import Path

HERE = Path(__file__).parent
SECRET_KEY = "tests-only"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SHARDS = ["shard_0", "shard_1", "shard_2", "shard_3"]
INSTALLED_APPS = [
    "django.contrib.auth", "django.contrib.contenttypes", "uid_fields.django", *{apps!r}
]
DATABASES = {{
    alias: {{"ENGINE": "django.db.backends.sqlite3", "NAME": str(HERE / f"{{alias}}.sqlite3")}}
    for alias in ["default", *SHARDS]
}}
DATABASE_ROUTERS = ["uid_fields.django.ShardRouter"]
MIGRATION_MODULES = {{app: f"docs_migrations.{{app}}" for app in {apps!r}}}
UID_FIELDS = {{
    "GENERATORS": {{
        "default": {{
            "kind": "snowflake", "layout": "twitter", "epoch": "2024-01-01T00:00:00Z",
            "fields": {{"datacenter": 0, "worker": 1}},
        }},
        "orders": {{
            "kind": "sharded", "layout": "instagram", "epoch": "2024-01-01T00:00:00Z",
            "single_process": True,
        }},
        "photos": {{
            "kind": "sharded", "layout": "instagram", "epoch": "2025-01-01T00:00:00Z",
            "single_process": True,
        }},
        "events": {{"kind": "locality", "sequential": False}},
    }},
    "SHARDS": {{"main": {{"databases": SHARDS}}}},
    "PUBLIC_IDS": {{"KEYS": {{1: "tests-only public id key, version 1"}}}},
}}
"""

CHECK = """\
import importlib
import sys

import django
from django.core.management import call_command

django.setup()
apps = sys.argv[1:]
call_command("check", *apps, fail_level="ERROR")
call_command("makemigrations", *apps, verbosity=0)
importlib.invalidate_caches()
call_command("makemigrations", *apps, check=True, dry_run=True, verbosity=1)
print("CHECKED")
"""


@dataclass
class ModelBlock:
    page: Path
    number: int  # among the page's blocks that define models
    code: str

    @property
    def app(self) -> str:
        return "docs_" + re.sub(r"\W", "_", self.page.stem) + f"_{self.number}"


def model_blocks() -> list[ModelBlock]:
    """Every python block (fragments too) of the docs and the README that defines a
    Django model, in page order."""
    found = []
    for page in [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]:
        blocks = [
            block.group(3)
            for block in _BLOCK.finditer(page.read_text(encoding="utf-8"))
            if block.group(2).split()[:1] == ["python"]
        ]
        models = [code for code in blocks if _MODEL.search(code)]
        found += [ModelBlock(page, number, code) for number, code in enumerate(models)]
    return found


def classes(code: str) -> dict[str, str]:
    """The block's top-level model classes by name: each ``class`` line and the
    indented (or blank) lines after it."""
    found: dict[str, str] = {}
    lines = code.splitlines()
    for start, line in enumerate(lines):
        match = _MODEL.match(line)
        if not match:
            continue
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end].startswith(" ")):
            end += 1
        found[match.group(1)] = "\n".join(lines[start:end]).rstrip() + "\n"
    return found


def models_module(block: ModelBlock, earlier: list[ModelBlock]) -> str:
    """The ``models.py`` of the block's app: its imports, the models it names from
    earlier blocks (or stand-ins), then its own."""
    own = classes(block.code)
    before: dict[str, str] = {}
    for previous in earlier:
        before.update(classes(previous.code))
    needed: dict[str, str] = {}

    def need(source: str) -> None:
        for name in _RELATED.findall(source):
            if name in own or name in needed or name == "self":
                continue
            needed[name] = before.get(name) or textwrap.dedent(
                f"""\
                class {name}(models.Model):  # named by the page, defined elsewhere
                    id = SnowflakeField(primary_key=True, shards="main")
                    objects = ShardedManager()
                """
            )
            need(needed[name])

    imports = [line for line in _IMPORT.findall(block.code) if "django" in line]
    imported = {word for line in imports for word in re.findall(r"\w+", line.split("import")[-1])}
    needed.update(dict.fromkeys(imported, ""))  # the block imports these: no stand-in
    for source in own.values():
        need(source)
    defined = [code for code in reversed(list(needed.values())) if code]
    parts = [PRELUDE, *imports, "", *defined, *own.values()]
    return "\n".join(parts)


def test_the_blocks_of_the_pages_are_found() -> None:
    pages = {block.page.name for block in model_blocks()}
    assert {"typing.md", "quickstart-django.md", "relations.md", "README.md"} <= pages
    typing = next(b for b in model_blocks() if b.page.name == "typing.md")
    assert list(classes(typing.code)) == ["Visit"]  # the SQLAlchemy class is left out


def test_a_named_model_comes_from_an_earlier_block_or_a_stand_in() -> None:
    page = DOCS / "page.md"
    first = ModelBlock(page, 0, "class Customer(models.Model):\n    name = 1\n")
    second = ModelBlock(
        page,
        1,
        "class Order(models.Model):\n    customer = models.ForeignKey(Customer)\n"
        "    shop = models.ForeignKey(Shop)\nOrder.objects.all()\n",
    )
    module = models_module(second, [first])
    assert "class Customer(models.Model):\n    name = 1\n" in module
    assert "class Shop(models.Model):  # named by the page" in module
    assert "Order.objects.all()" not in module


def test_the_documented_models_pass_check_and_makemigrations(tmp_path: Path) -> None:
    pytest.importorskip("django")
    blocks = model_blocks()
    apps = []
    for index, block in enumerate(blocks):
        if (block.page.name, block.number) in NEEDS:
            continue
        package = tmp_path / block.app
        package.mkdir()
        (package / "__init__.py").write_text("")
        earlier = [b for b in blocks[:index] if b.page == block.page]
        (package / "models.py").write_text(models_module(block, earlier), encoding="utf-8")
        apps.append(block.app)
    (tmp_path / "docs_migrations").mkdir()
    (tmp_path / "docs_migrations" / "__init__.py").write_text("")
    (tmp_path / "docs_models_settings.py").write_text(SETTINGS.format(apps=apps))
    (tmp_path / "docs_models_check.py").write_text(CHECK)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["DJANGO_SETTINGS_MODULE"] = "docs_models_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    result = subprocess.run(
        [sys.executable, "docs_models_check.py", *apps],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "CHECKED" in result.stdout
