"""The docs' code as the type checkers get it (``tests/typecheck/docs_code.py``), and the
typed SQLAlchemy example run as a program: its types and its behaviour agree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
