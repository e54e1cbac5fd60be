"""Sphinx configuration: furo, Markdown pages (MyST), autodoc of the core and adapters."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))

# autodoc imports uid_fields.django.*, which needs configured settings.
import django  # noqa: E402
from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "uid_fields.django"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        USE_TZ=True,
    )
    django.setup()

project = "uid_fields"
author = "uid_fields contributors"
copyright = "uid_fields contributors"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "uid_fields"
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # Django's and SQLAlchemy's own docstrings are not ours
autodoc_typehints = "description"  # types listed under each signature, which stays short
autodoc_default_options = {"members": True, "show-inheritance": True}

# Pages other people write. They join the table of contents, and links to them become
# links, only once their file exists, so the build is green before and after.
OPTIONAL_PAGES = ["workers", "benchmarks"]
PRESENT = [name for name in OPTIONAL_PAGES if (DOCS / f"{name}.md").exists()]
_OPTIONAL_LINK = re.compile(r"\[([^\]]+)\]\(@(\w+)\)")  # [text](@workers)


def _optional_link(match: re.Match[str]) -> str:
    text, name = match.group(1), match.group(2)
    return f"{{doc}}`{text} </{name}>`" if name in PRESENT else text


def _source_read(app: Any, docname: str, source: list[str]) -> None:
    text = source[0]
    if "@optional-pages@" in text or _OPTIONAL_LINK.search(text):
        app.env.uid_optional_docs = getattr(app.env, "uid_optional_docs", set()) | {docname}
    text = text.replace("@optional-pages@", "\n".join(PRESENT))
    source[0] = _OPTIONAL_LINK.sub(_optional_link, text)


def _reread_optional(app: Any, env: Any, added: Any, changed: Any, removed: Any) -> list[str]:
    # An incremental build must notice a page that appeared since the last one.
    return sorted(getattr(env, "uid_optional_docs", set()))


def setup(app: Any) -> None:
    app.connect("source-read", _source_read)
    app.connect("env-get-outdated", _reread_optional)
