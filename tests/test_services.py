"""The real servers the integration tests use answer (or the run says why not)."""

from __future__ import annotations

from tests import services


def test_postgresql_answers() -> None:
    with services.postgres_connection() as conn:
        row = conn.execute("SELECT 9223372036854775807::bigint").fetchone()
    assert row == (2**63 - 1,)


def test_mariadb_answers() -> None:
    conn = services.mysql_connection()
    with conn, conn.cursor() as cursor:
        cursor.execute("SELECT CAST(18446744073709551615 AS UNSIGNED)")
        assert cursor.fetchone() == (2**64 - 1,)


def test_redis_answers() -> None:
    assert services.redis_client().ping() is True
