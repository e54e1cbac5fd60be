"""Where the real servers are, and what happens when one is missing.

On a laptop without a server the tests that need it skip and say why; with
UID_FIELDS_REQUIRE_SERVICES=1 (CI) a missing server fails the run instead.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

POSTGRES_URL = os.environ.get(
    "UID_FIELDS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
MYSQL_URL = os.environ.get("UID_FIELDS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
REDIS_URL = os.environ.get("UID_FIELDS_REDIS_URL", "redis://127.0.0.1:6379/0")


def required() -> bool:
    return os.environ.get("UID_FIELDS_REQUIRE_SERVICES") == "1"


def unavailable(name: str, error: BaseException) -> NoReturn:
    message = f"{name} is not reachable ({type(error).__name__}: {error})"
    if required():
        pytest.fail(f"{message}; UID_FIELDS_REQUIRE_SERVICES=1 makes this a failure", pytrace=False)
    pytest.skip(f"{message}; start it or set UID_FIELDS_*_URL")
