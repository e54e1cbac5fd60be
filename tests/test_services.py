"""The real servers the integration tests use answer (or the run says why not)."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests import services


def test_postgresql_answers() -> None:
    import psycopg

    try:
        with psycopg.connect(services.POSTGRES_URL, connect_timeout=5) as conn:
            row = conn.execute("SELECT 9223372036854775807::bigint").fetchone()
    except psycopg.OperationalError as exc:
        services.unavailable("PostgreSQL", exc)
    assert row == (2**63 - 1,)


def test_mariadb_answers() -> None:
    import pymysql

    url = urlsplit(services.MYSQL_URL)
    try:
        conn = pymysql.connect(
            host=url.hostname,
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
            connect_timeout=5,
        )
    except pymysql.err.OperationalError as exc:
        services.unavailable("MariaDB", exc)
    with conn, conn.cursor() as cursor:
        cursor.execute("SELECT CAST(18446744073709551615 AS UNSIGNED)")
        assert cursor.fetchone() == (2**64 - 1,)


def test_redis_answers() -> None:
    import redis

    client = redis.Redis.from_url(services.REDIS_URL, socket_timeout=5)
    try:
        pong = client.ping()
    except redis.exceptions.ConnectionError as exc:
        services.unavailable("Redis", exc)
    assert pong is True
