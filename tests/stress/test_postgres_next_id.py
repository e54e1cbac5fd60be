"""The PostgreSQL next_id function under 8 concurrent connections x 50k ids."""

from __future__ import annotations

import threading
import uuid

from tests import services
from uid_fields import INSTAGRAM
from uid_fields.sql.postgres import NextIdFunction

CONNECTIONS, PER_CONNECTION = 8, 50_000


def test_8_connections_x_50k_ids_without_duplicates() -> None:
    admin = services.postgres_connection()
    function = NextIdFunction(INSTAGRAM, shard=5, name=f"uidf_stress_{uuid.uuid4().hex[:10]}")
    for statement in function.create_statements():
        admin.execute(statement)
    results: list[list[int]] = [[] for _ in range(CONNECTIONS)]
    errors: list[BaseException] = []

    def run(slot: int) -> None:
        try:
            conn = services.postgres_connection()
            rows = conn.execute(
                f"SELECT {function.call} FROM generate_series(1, {PER_CONNECTION})"
            ).fetchall()
            results[slot] = [int(row[0]) for row in rows]
            conn.close()
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(CONNECTIONS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        ids = [i for r in results for i in r]
        assert len(ids) == CONNECTIONS * PER_CONNECTION
        assert len(set(ids)) == len(ids)
        assert {INSTAGRAM.decompose(i).shard for i in ids} == {5}
        assert all(i > 0 for i in ids)
    finally:
        for statement in function.drop_statements():
            admin.execute(statement)
        admin.close()
