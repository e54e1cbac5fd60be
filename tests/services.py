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
# Test runs against the same servers (two checkouts, two CI jobs) keep apart: each run
# names its databases with a namespace of its own, uidf_sa_r1234_0 rather than uidf_sa_0,
# and drops only those. UID_FIELDS_TEST_NAMESPACE=a picks one (uidf_sa_a_0); without it
# the run's process id does, set in the environment so the processes a test starts use
# the same names.
NAMESPACE = os.environ.setdefault("UID_FIELDS_TEST_NAMESPACE", f"r{os.getpid()}")


def database_name(base: str, index: int) -> str:
    """The name of fixed test database ``index`` of family ``base`` (e.g. ``uidf_sa``)."""
    return f"{base}_{NAMESPACE}_{index}" if NAMESPACE else f"{base}_{index}"


def required() -> bool:
    return os.environ.get("UID_FIELDS_REQUIRE_SERVICES") == "1"


def unavailable(name: str, error: BaseException) -> NoReturn:
    message = f"{name} is not reachable ({type(error).__name__}: {error})"
    if required():
        pytest.fail(f"{message}; UID_FIELDS_REQUIRE_SERVICES=1 makes this a failure", pytrace=False)
    pytest.skip(f"{message}; start it or set UID_FIELDS_*_URL")


def _mysql_params() -> dict[str, object]:
    from urllib.parse import urlsplit

    url = urlsplit(MYSQL_URL)
    return {
        "host": url.hostname or "127.0.0.1",
        "port": url.port or 3306,
        "user": url.username or "root",
        "password": url.password or "",
        "connect_timeout": 5,
    }


def postgres_connection():  # type: ignore[no-untyped-def]
    """A psycopg connection to the server, or a skip/failure saying why there is none."""
    import psycopg

    try:
        return psycopg.connect(POSTGRES_URL, connect_timeout=5, autocommit=True)
    except psycopg.OperationalError as exc:
        unavailable("PostgreSQL", exc)


def mysql_connection():  # type: ignore[no-untyped-def]
    import pymysql

    try:
        return pymysql.connect(**_mysql_params())  # type: ignore[arg-type]
    except pymysql.err.OperationalError as exc:
        unavailable("MariaDB", exc)


def redis_client():  # type: ignore[no-untyped-def]
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        unavailable("Redis", exc)
    return client
