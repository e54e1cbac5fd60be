"""The PostgreSQL next_id functions (PL/pgSQL and C) under 8 concurrent connections x
12,500 ids (100,000 ids: about 100 ms of a shard's whole sequence space, so the
sessions contend for every millisecond)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from tests import services
from uid_fields import INSTAGRAM
from uid_fields.sql.postgres import NextIdFunction

CONNECTIONS, PER_CONNECTION = 8, 12_500


def _made_by(connect: Callable[[], Any], call: str) -> list[int]:
    """Ids made by ``CONNECTIONS`` concurrent connections, ``PER_CONNECTION`` each."""
    results: list[list[int]] = [[] for _ in range(CONNECTIONS)]
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        try:
            with connect() as conn:
                rows = conn.execute(
                    f"SELECT {call} FROM generate_series(1, {PER_CONNECTION})"
                ).fetchall()
                results[slot] = [int(row[0]) for row in rows]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    ids = [i for r in results for i in r]
    assert len(ids) == CONNECTIONS * PER_CONNECTION and all(i > 0 for i in ids)
    return ids


def test_8_connections_x_12500_ids_without_duplicates() -> None:
    admin = services.postgres_connection()
    function = NextIdFunction(INSTAGRAM, shard=5, name=f"uidf_stress_{uuid.uuid4().hex[:10]}")
    for statement in function.create_statements():
        admin.execute(statement)
    try:
        ids = _made_by(services.postgres_connection, function.call)
        assert len(set(ids)) == len(ids)
        assert {INSTAGRAM.decompose(i).shard for i in ids} == {5}
    finally:
        for statement in function.drop_statements():
            admin.execute(statement)
        admin.close()


def test_the_c_function_8_connections_x_12500_ids_without_duplicates() -> None:
    from tests.postgres_servers import c_library, create_extension, postgres_cluster

    with postgres_cluster(*c_library()) as cluster:
        url = cluster.create_database("uidf_stress_c")
        create_extension(url)
        function = NextIdFunction(INSTAGRAM, shard=5, language="c")
        with psycopg.connect(url, autocommit=True) as admin:
            for statement in function.create_statements():
                admin.execute(statement)
        ids = _made_by(lambda: psycopg.connect(url, autocommit=True), function.call)
    assert len(set(ids)) == CONNECTIONS * PER_CONNECTION
    assert {INSTAGRAM.decompose(i).shard for i in ids} == {5}
