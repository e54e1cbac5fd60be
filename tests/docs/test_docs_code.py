"""The docs' code as the type checkers get it (``tests/typecheck/docs_code.py``), and the
typed SQLAlchemy example run as a program: its types and its behaviour agree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.typecheck.docs_code import (
    DJANGO_HEADER,
    ROOT,
    checked_blocks,
    module_name,
    module_text,
    pages,
)

PAGE = """# Title

```python
import uuid
```

```python fragment
UID_FIELDS = {...}
```

```sh
pip install uid-fields
```

````python
x = uuid.uuid4()
````
"""


def test_blocks_marked_fragment_and_other_languages_are_left_out() -> None:
    blocks = checked_blocks(PAGE)
    assert [(b.line, b.lines) for b in blocks] == [(4, ["import uuid"]), (16, ["x = uuid.uuid4()"])]


def test_code_keeps_its_line_numbers_in_the_page() -> None:
    code = module_text(PAGE)
    assert code is not None
    lines = code.splitlines()
    assert lines[3] == "import uuid" and lines[15] == "x = uuid.uuid4()"
    assert set(lines[:3] + lines[4:15]) == {""}
    assert module_text("# Only prose\n\n```python fragment\nx = 1\n```\n") is None


def test_pages_using_django_leave_field_annotations_to_the_plugin() -> None:
    code = module_text("# T\n\n```python\nfrom django.db import models\n```\n")
    assert code is not None and code.startswith(DJANGO_HEADER + "\n")
    assert not (module_text(PAGE) or "").startswith(DJANGO_HEADER)


def test_every_page_is_read_and_the_quickstarts_are_checked() -> None:
    names = {module_name(page) for page in pages()}
    assert {"docs_sqlalchemy", "docs_quickstart_django", "docs_readme"} <= names
    for page in ("sqlalchemy.md", "quickstart-django.md"):
        code = module_text((ROOT / "docs" / page).read_text(encoding="utf-8"))
        assert code is not None and "IdParts(SnowflakeParts)" in code


def test_the_typed_sqlalchemy_example_runs(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-W", "error", "-m", "tests.typecheck.sqlalchemy_example"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


#: A fenced block, its info string and its body.
_FENCE = re.compile(r"^(`{3,})([^\n]*)\n(.*?)^\1\s*$", re.S | re.M)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>()`]+")


def _foreign_hosts(text: str) -> list[str]:
    """URLs of runnable blocks (not marked ``fragment``) whose host is not loopback."""
    found = []
    for block in _FENCE.finditer(text):
        if "fragment" in block.group(2):
            continue
        for url in _URL.findall(block.group(3)):
            try:
                host = urlsplit(url).hostname
            except ValueError:
                host = "?"
            if host is None or host in ("localhost", "::1") or host.startswith("127."):
                continue
            found.append(url)
    return found


def test_the_host_check_sees_a_foreign_host_only_in_a_runnable_block() -> None:
    page = (
        '```python\nRedisLease("redis://10.0.0.5:6379/0")\n```\n'
        '```python fragment\nRedisLease("redis://10.0.0.6:6379/0")\n```\n'
        '```python\nRedisLease("redis://127.0.0.1:6379/0")\n```\n'
    )
    assert _foreign_hosts(page) == ["redis://10.0.0.5:6379/0"]


def test_runnable_blocks_reach_loopback_only() -> None:
    """Run verbatim, a runnable block connects only to this machine; other hosts are
    for blocks marked ``fragment``."""
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        assert _foreign_hosts(page.read_text(encoding="utf-8")) == [], page.name
