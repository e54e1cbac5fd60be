"""Decimal ids made by MariaDB: the function, the column default, decoded in Python."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests import services
from uid_fields import DECIMAL, DECIMAL_SQL
from uid_fields.sql import DecimalIdFunction

pytestmark = pytest.mark.mariadb


@pytest.fixture
def cursor() -> Iterator[Any]:
    connection = services.mysql_connection()
    name = f"uidf_dec_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as admin:
        admin.execute(f"CREATE DATABASE {name}")
        admin.execute(f"USE {name}")
    try:
        with connection.cursor() as cur:
            yield cur
    finally:
        with connection.cursor() as admin:
            admin.execute(f"DROP DATABASE {name}")
        connection.close()


@pytest.mark.parametrize(("layout", "server"), [(DECIMAL, 3), (DECIMAL_SQL, 0)])
def test_the_function_makes_ids_the_layout_decodes(cursor: Any, layout: Any, server: int) -> None:
    function = DecimalIdFunction(layout, server=server)
    for statement in function.create_statements():
        cursor.execute(statement)
    for statement in function.create_statements():  # installing again is harmless
        cursor.execute(statement)
    before_ms = int(time.time() * 1000)
    cursor.execute(f"SELECT {function.call} FROM (SELECT 1 UNION SELECT 2 UNION SELECT 3) t")
    ids = [int(row[0]) for row in cursor.fetchall()]
    after_ms = int(time.time() * 1000)
    for value in ids:
        parts = layout.decompose(value)
        unit_ms = layout.time_unit_ms
        assert before_ms - unit_ms <= parts.timestamp_ms <= after_ms + unit_ms
        assert parts.server == server  # the time decoded to now: no digit misaligned


def test_the_expression_serves_as_a_column_default(cursor: Any) -> None:
    function = DecimalIdFunction(DECIMAL, server=7)
    cursor.execute(
        "CREATE TABLE tickets (id BIGINT UNSIGNED NOT NULL PRIMARY KEY "
        f"DEFAULT {function.expression}, label VARCHAR(10))"
    )
    cursor.execute("INSERT INTO tickets (label) VALUES ('a')")
    cursor.execute("SELECT id FROM tickets")
    (value,) = cursor.fetchone()
    assert DECIMAL.decompose(int(value)).server == 7


def test_a_small_random_part_keeps_its_digits() -> None:
    # The post's RIGHT(..., 9) dropped leading zeros; arithmetic keeps every digit.
    value = DECIMAL_SQL.compose(
        timestamp_ms=DECIMAL_SQL.epoch_ms + 501_583_840_000, random=11_259_375
    )
    assert DECIMAL_SQL.decompose(value).timestamp_ms == DECIMAL_SQL.epoch_ms + 501_583_840_000
    assert DECIMAL_SQL.decompose(value).random == 11_259_375


@pytest.mark.parametrize("bad", [{"server": 10}, {"server": True}, {"name": "x; DROP"}])
def test_bad_arguments_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises((TypeError, ValueError)):
        DecimalIdFunction(DECIMAL, **bad)
