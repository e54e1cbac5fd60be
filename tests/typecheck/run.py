"""``make typecheck-docs``: the public API type-checks in user code.

Runs ``mypy --strict`` and ``pyright`` over the documentation's code (``docs_code``: each
page's ```python blocks not marked ``fragment``) and the typed example modules
(``sqlalchemy_example``, ``django_example``), whose ``assert_type`` calls both checkers
verify. mypy checks the Django example with the django-stubs plugin (``mypy.ini``), as
Django projects run it; the docs' scripts define their models outside any installed
app, which that plugin cannot read, so they are checked without it. Errors inside the
installed packages are not reported: only the user's side of the API is under test.

    python -m tests.typecheck.run
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .docs_code import ROOT, write_modules

HERE = Path(__file__).resolve().parent
EXAMPLES = [HERE / "sqlalchemy_example.py", HERE / "django_example.py"]


def main() -> int:
    python = sys.executable
    bin_dir = Path(python).parent
    cache = ROOT / ".mypy_cache"
    with tempfile.TemporaryDirectory(prefix="uid-fields-docs-") as folder:
        pages = [str(p) for p in write_modules(Path(folder))]
        plain = [*pages, str(HERE / "sqlalchemy_example.py")]
        checks = {
            "mypy --strict (docs, SQLAlchemy example)": [
                *(python, "-m", "mypy", "--strict", "--follow-imports=silent"),
                *("--cache-dir", str(cache / "typecheck-plain"), *plain),
            ],
            "mypy --strict + django-stubs plugin (Django example)": [
                *(python, "-m", "mypy", "--config-file", str(HERE / "mypy.ini")),
                *("--cache-dir", str(cache / "typecheck-django"), str(EXAMPLES[1])),
            ],
            "pyright (docs, both examples)": [
                *(str(bin_dir / "pyright"), "--pythonpath", python),
                *pages,
                *map(str, EXAMPLES),
            ],
        }
        # The three run at once (each is mostly one process): the step stays well
        # under a minute on two cores.
        # No PyPI query for a newer pyright on each run (the package bundles pyright).
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1"}
        started = time.monotonic()
        running = {
            name: subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            for name, command in checks.items()
        }
        failed = 0
        for name, process in running.items():
            output, _ = process.communicate()
            took = time.monotonic() - started
            ok = process.returncode == 0
            failed += not ok
            status = "ok" if ok else f"FAILED (exit {process.returncode})"
            print(f"typecheck-docs: {name}: {status} ({took:.1f} s)")
            if not ok:
                print(output.decode(errors="replace"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
