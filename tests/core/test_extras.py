"""A missing optional dependency names the extra that installs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = [
    ("django", "uid_fields.django", "uid-fields[django]"),
    ("sqlalchemy", "uid_fields.sqlalchemy", "uid-fields[sqlalchemy]"),
    ("rest_framework", "uid_fields.django.rest", "uid-fields[drf]"),
    ("alembic", "uid_fields.sqlalchemy.alembic", "uid-fields[alembic]"),
    ("flask_sqlalchemy", "uid_fields.sqlalchemy.flask", "uid-fields[flask]"),
]
#: what an integration also stands on, which must be installed for its own extra to be
#: the missing one (without Django, ``uid_fields.django.rest`` names the django extra)
NEEDS = {"rest_framework": "django", "alembic": "sqlalchemy", "flask_sqlalchemy": "flask"}


@pytest.mark.parametrize(("absent", "module", "extra"), CASES)
def test_importing_an_integration_without_its_package_names_the_extra(
    absent: str, module: str, extra: str
) -> None:
    """In a fresh interpreter where ``absent`` cannot be imported (``sys.modules[name] =
    None`` is how Python marks a module as unimportable)."""
    if absent in NEEDS:
        pytest.importorskip(NEEDS[absent])  # the install without it checks its own extra
    program = (
        "import os, sys\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'tests.django.settings')\n"
        f"sys.modules[{absent!r}] = None\n"
        "try:\n"
        f"    __import__({module!r})\n"
        "except ModuleNotFoundError as error:\n"
        "    print(type(error).__name__, error.name, error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith(f"MissingExtraError {absent} "), out
    assert f"pip install '{extra}'" in out


def test_a_missing_module_of_no_extra_is_left_as_it_was() -> None:
    from uid_fields._internal.extras import missing

    error = missing("django", ModuleNotFoundError("No module named 'thing'", name="thing"))
    assert isinstance(error, ModuleNotFoundError) and error.name == "thing"
    assert "pip install" not in str(error)
