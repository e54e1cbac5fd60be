"""Django test session: the shard databases' server must answer for the chosen backend."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests import services


@pytest.fixture(scope="session", autouse=True)
def _shard_server_reachable() -> None:
    if settings.BACKEND == "postgres":
        services.postgres_connection().close()
    elif settings.BACKEND == "mysql":
        services.mysql_connection().close()
