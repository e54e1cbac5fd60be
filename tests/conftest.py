"""Test-wide settings: Hypothesis profile, the markers CI selects by, partial installs.

Markers (``pyproject.toml`` lists them; ``--strict-markers`` refuses others) are put on
here from what a test is, so no target keeps a list of files:

- ``postgres`` / ``mariadb``: the test talks to that server. A test parametrized by
  backend (the ``shards`` and ``db`` fixtures: ids ``[postgresql]``, ``[mariadb]``) is
  marked per parameter, one using a server's session fixture (``postgres_engines``...)
  is marked for it, a module that connects on its own says so; a Django test that uses
  the database is marked for the backend ``UID_FIELDS_TEST_DB`` chose, so ``-m postgres``
  in the PostgreSQL pass leaves out the Django tests that touch no database (their
  result cannot depend on it).
- ``stress``: everything under ``tests/stress`` (processes, kills, faults).
- ``browser``: everything under ``tests/browser``.
- ``sdist``: everything under ``tests/docs`` (the pages the sdist ships).

``bench``, ``versions`` and the other ``sdist`` modules say so themselves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

TESTS = Path(__file__).resolve().parent
DIRECTORY_MARKS = {"stress": "stress", "browser": "browser", "docs": "sdist"}
# Parameter ids of the backend fixtures, and UID_FIELDS_TEST_DB's values, to markers.
BACKEND_MARKS = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "mariadb": "mariadb",
    "mysql": "mariadb",
}
# The session fixtures that make the SQLAlchemy tests' server databases.
FIXTURE_MARKS = {
    "postgres_databases": "postgres",
    "postgres_engines": "postgres",
    "mariadb_engines": "mariadb",
}
DJANGO_BACKEND_MARKS = {"postgres": "postgres", "mysql": "mariadb"}
DJANGO_DATABASE_FIXTURES = {"db", "transactional_db"}


def _django_backend_mark(item: pytest.Item) -> str | None:
    """The server a Django test talks to: none when it uses no database or the shards
    are SQLite files."""
    if TESTS / "django" not in item.path.parents:
        return None
    uses_database = item.get_closest_marker("django_db") is not None or bool(
        DJANGO_DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )
    if not uses_database:
        return None
    from django.conf import settings as django_settings

    return DJANGO_BACKEND_MARKS.get(getattr(django_settings, "BACKEND", "sqlite"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        marks: set[str] = set()
        relative = item.path.relative_to(TESTS).parts if TESTS in item.path.parents else ()
        if relative and relative[0] in DIRECTORY_MARKS:
            marks.add(DIRECTORY_MARKS[relative[0]])
        marks.update(
            FIXTURE_MARKS[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURE_MARKS
        )
        callspec: Any = getattr(item, "callspec", None)
        if callspec is not None:
            marks.update(BACKEND_MARKS[p] for p in callspec.id.split("-") if p in BACKEND_MARKS)
        django_mark = _django_backend_mark(item)
        if django_mark is not None:
            marks.add(django_mark)
        for mark in sorted(marks):
            item.add_marker(mark)


# UID_FIELDS_TEST_PARTIAL_INSTALL=1 (the SQLAlchemy-only run): a test module that imports
# a package this install does not have is skipped, naming the package, instead of failing
# to collect. Only a missing third-party package counts: a missing uid_fields or tests
# module is a bug and still fails.
PARTIAL_INSTALL = os.environ.get("UID_FIELDS_TEST_PARTIAL_INSTALL") == "1"


def _missing_package(error: BaseException) -> str | None:
    """The package whose absence made an import fail, through the chain of causes (a
    library may say so in an ImportError of its own: SQLAlchemy's asyncio for greenlet)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            return cause.name.partition(".")[0]
        cause = cause.__cause__ or cause.__context__
    return None


class _ModuleOfPartialInstall(pytest.Module):
    def _getobj(self) -> Any:
        try:
            return super()._getobj()  # type: ignore[no-untyped-call]
        except self.CollectError as error:
            top = _missing_package(error)
            if top is None or top in {"uid_fields", "tests"}:
                raise
            raise pytest.skip.Exception(
                f"needs {top}, which this install leaves out", allow_module_level=True
            ) from None


if PARTIAL_INSTALL:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        """A test that imports such a package when it runs is skipped the same way."""
        outcome = yield
        report = outcome.get_result()
        if call.excinfo is None or not report.failed:
            return
        top = _missing_package(call.excinfo.value)
        if top is not None and top not in {"uid_fields", "tests"}:
            report.outcome = "skipped"
            report.longrepr = (
                str(item.path),
                item.location[1] or 0,
                f"Skipped: needs {top}, which this install leaves out",
            )

    def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Any:
        if module_path.name == "__init__.py":
            return None
        return _ModuleOfPartialInstall.from_parent(parent, path=module_path)
