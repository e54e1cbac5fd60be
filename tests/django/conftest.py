"""Django test session: the shard databases' server must answer for the chosen backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from tests import services
from uid_fields.ops import parallel


@pytest.fixture(scope="session", autouse=True)
def _shard_server_reachable() -> None:
    if settings.BACKEND == "postgres":
        services.postgres_connection().close()
    elif settings.BACKEND == "mysql":
        services.mysql_connection().close()


@pytest.fixture(scope="session", autouse=True)
def _fanout_connections_closed(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Parallel fan-outs leave connections open in the pool's threads; close them before
    the test databases are dropped (a database with sessions cannot be)."""
    yield
    with django_db_blocker.unblock():
        parallel.shutdown()
        connections.close_all()  # a replica alias mirrors its shard's test database
