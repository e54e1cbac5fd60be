"""pytest-django support for sharded projects: ``pytest_plugins = ["uid_fields.django.testing"]``.

What a project's own test suite needs beyond pytest-django, in one opt-in plugin (opt-in,
not an entry point: an entry point would import Django in every pytest run of a
SQLAlchemy-only project):

- **Shard test databases are dropped cleanly.** Parallel fan-outs run on a pool of
  threads that keep their own connections, and a replica's alias (a test mirror of its
  shard) keeps one of its own; pytest-django then cannot drop the shards' test databases
  ("database ... is being accessed by other users") and leaves them behind. The plugin
  closes the pool and every connection before the test databases are torn down.
- **No ``databases="__all__"`` boilerplate.** A test marked ``@pytest.mark.django_db``
  without ``databases=`` may use every database, shards included (pytest-django would
  allow only ``default``, and a routed query would fail). Turn it off with
  ``uid_fields_all_databases = false`` in the pytest configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from ..ops import parallel

__all__ = ["django_db_setup", "pytest_addoption", "pytest_collection_modifyitems"]

_INI = "uid_fields_all_databases"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Adds the ini option ``uid_fields_all_databases`` (default true): whether a
    ``django_db`` test without ``databases=`` may use every database."""
    parser.addini(
        _INI,
        "let @pytest.mark.django_db tests without databases= use every database (shards)",
        type="bool",
        default=True,
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Gives each ``django_db`` test without ``databases=`` every database, shards
    included: a routed query of such a test would otherwise fail on a shard alias."""
    if not config.getini(_INI):
        return
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is None or "databases" in marker.kwargs:
            continue
        # prepended: pytest-django reads the closest (first) django_db marker of the item
        widened = pytest.mark.django_db(*marker.args, **marker.kwargs, databases="__all__")
        item.add_marker(widened, append=False)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's ``django_db_setup``, and the fan-out pool closed before the test
    databases are dropped (a database with open sessions cannot be)."""
    yield
    with django_db_blocker.unblock():
        parallel.shutdown()
        # This thread's connections too: pytest-django closes the connection of each
        # database it drops, not of the aliases that mirror it (a replica's alias).
        connections.close_all()
