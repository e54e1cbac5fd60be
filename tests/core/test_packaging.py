"""The package metadata: one version, the license, published extras vs development groups."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

import uid_fields
from tests.core.test_public_api import REMOVED
from uid_fields.errors import DEPRECATED_NAMES

pytestmark = pytest.mark.sdist

ROOT = Path(__file__).resolve().parents[2]
# hatchling's default pattern for a version file ([tool.hatch.version] path)
HATCH_VERSION = re.compile(r"""(?i)^(__version__|VERSION) *= *(['"])v?(?P<version>.+?)\2""", re.M)


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_version_is_the_one_pyproject_publishes() -> None:
    pyproject = _pyproject()
    project = pyproject["project"]
    assert "version" not in project and "version" in project["dynamic"]
    source = pyproject["tool"]["hatch"]["version"]["path"]
    found = HATCH_VERSION.search((ROOT / source).read_text(encoding="utf-8"))
    assert found is not None, f"hatch finds no __version__ in {source}"
    assert found["version"] == uid_fields.__version__
    assert str(Version(uid_fields.__version__)) == uid_fields.__version__  # PEP 440, normalised


def test_license_file_matches_the_declared_license() -> None:
    assert _pyproject()["project"]["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "uid_fields contributors" in text
    assert "Permission is hereby granted, free of charge" in text


def test_changelog_has_an_unreleased_section_and_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text
    assert f"## [{uid_fields.__version__}]" in text


def test_published_extras_hold_no_development_tools() -> None:
    pyproject = _pyproject()
    extras = pyproject["project"]["optional-dependencies"]
    assert set(extras) == {
        "django",
        "sqlalchemy",
        "asyncio",
        "redis",
        "postgres",
        "mysql",
        "drf",
        "alembic",
        "flask",
    }
    assert extras["django"] == ["Django>=5.2,<7"]  # no cap below the next major
    assert extras["postgres"] == ["psycopg>=3.1"]  # the application picks the build
    assert extras["asyncio"] == ["SQLAlchemy[asyncio]>=2.0.2,<2.2"]
    assert extras["sqlalchemy"] == ["SQLAlchemy>=2.0.2,<2.2"]
    groups = pyproject["dependency-groups"]
    assert {"dev", "test", "lint", "docs", "bench"} <= set(groups)


def test_classifiers_name_the_supported_versions() -> None:
    classifiers = set(_pyproject()["project"]["classifiers"])
    for python in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {python}" in classifiers
    for django in ("5.2", "6.0", "6.1"):
        assert f"Framework :: Django :: {django}" in classifiers
    for past_end_of_life in ("4.2", "5.0", "5.1"):
        assert f"Framework :: Django :: {past_end_of_life}" not in classifiers
    # PEP 639: a license expression and License :: classifiers do not mix
    assert not any(c.startswith("License ::") for c in classifiers)


def test_the_sdist_ships_what_its_tests_read() -> None:
    """The sdist carries ``tests``, so it carries what they read: the docs pages, the
    example project, the C ``next_id`` source and the Makefile that builds it.
    ``make test-sdist`` runs a reduced suite from the unpacked sdist to hold this."""
    sdist = _pyproject()["tool"]["hatch"]["build"]["targets"]["sdist"]
    for path in ("uid_fields", "tests", "docs", "example_project", "postgres", "Makefile"):
        assert path in sdist["include"], path
        assert (ROOT / path).exists(), path
    for artefact in ("*.so", "*.o", "*.bc", "example_project/var", "docs/_build"):
        assert artefact in sdist["exclude"], artefact


def test_the_wheel_carries_the_source_of_the_postgres_extension() -> None:
    """Who installs the wheel builds the ``uid_fields`` extension from
    ``uid_fields/postgres/`` (``python -m uid_fields pg-extension --install``): every
    source file of ``postgres/``, a new upgrade script too, is in the wheel."""
    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    source = ROOT / "postgres"
    shipped = {
        path.relative_to(ROOT).as_posix()
        for path in source.rglob("*")
        if path.is_file()
        and path.suffix not in (".so", ".o", ".bc")
        and path.name != ".gitignore"
        and "results" not in path.relative_to(source).parts
        and not path.name.startswith("regression.")
    }
    assert wheel["force-include"] == {path: f"uid_fields/{path}" for path in shipped}


def test_pypi_readers_get_a_status_and_keywords() -> None:
    project = _pyproject()["project"]
    status = [c for c in project["classifiers"] if c.startswith("Development Status ::")]
    assert status == ["Development Status :: 4 - Beta"]
    assert {"django", "sqlalchemy", "snowflake", "sharding"} <= set(project["keywords"])


DATED = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\d{4}-\d{2}-\d{2})$", re.M)


def test_the_changelog_is_in_release_shape() -> None:
    """An empty ``[Unreleased]`` on top, then dated versions, the newest the package's,
    whose ``Deprecated`` section names every deprecated name that warns and whose
    ``Removed`` section names every path removed."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    unreleased = text.index("## [Unreleased]")
    releases = list(DATED.finditer(text))
    assert releases and releases[0]["version"] == uid_fields.__version__
    assert Version(uid_fields.__version__) > Version("0.1.0")
    assert unreleased < releases[0].start()
    newest = text[releases[0].end() : text.index("\n## [", releases[0].end())]
    for heading, names in (
        ("### Deprecated", [*DEPRECATED_NAMES, "read_your_writes_s="]),
        ("### Removed", list(REMOVED)),
    ):
        part = newest[newest.index(heading) :]
        end = part.find("\n### ", 1)
        part = part if end < 0 else part[:end]
        for old in names:
            assert f"`{old}`" in part, old
    # every dated version has a link reference, and 0.1.0 a date
    for version in [m["version"] for m in releases]:
        assert f"\n[{version}]: https://" in text, version
    assert "## [0.1.0] - " in text


def test_the_readme_installs_and_uses_before_it_develops() -> None:
    """On PyPI the README is a user's page: install and usage first, with no ``make``
    target (those need a checkout); the development commands in a last section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.M)
    assert sections[-1].startswith("Development\n")
    for section in sections[:-1]:
        assert "make " not in section, section[:40]
    assert "make demo" in sections[-1] and "make test" in sections[-1]
    assert any(s.startswith("Install\n") for s in sections)
