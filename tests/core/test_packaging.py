"""The package metadata: one version, the license, published extras vs development groups."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.version import Version

import uid_fields

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


def test_the_wheel_carries_the_c_source_of_next_id() -> None:
    """Who installs the wheel builds ``uid_fields_pg`` from ``uid_fields/postgres/``."""
    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["force-include"] == {
        "postgres/uid_fields_pg.c": "uid_fields/postgres/uid_fields_pg.c",
        "postgres/Makefile": "uid_fields/postgres/Makefile",
    }
