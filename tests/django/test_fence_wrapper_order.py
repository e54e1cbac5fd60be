"""The fence translator and the write watcher join a connection's execute wrappers
without disturbing a user's ``connection.execute_wrapper()`` block that opened it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from uid_fields.django.fences import FENCE_TRANSLATOR
from uid_fields.django.replicas import WRITE_WATCHER

pytestmark = pytest.mark.django_db(databases="__all__", transaction=True)


def mine(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    return execute(sql, params, many, context)


def test_a_connection_first_opened_inside_a_users_wrapper_keeps_both_in_place() -> None:
    found: dict[str, Any] = {}

    def thread() -> None:  # a thread's first connection: its wrapper list starts empty
        connection = connections["default"]
        try:
            # The cursor connects inside the block: connection_created fires there.
            with connection.execute_wrapper(mine), connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            found["wrappers"] = list(connection.execute_wrappers)
        finally:
            connection.close()

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join()
    assert mine not in found["wrappers"]  # the user's block took its own wrapper off
    assert FENCE_TRANSLATOR in found["wrappers"]  # and left the fence's translator
    assert WRITE_WATCHER in found["wrappers"]  # and the read-your-writes pins' watcher
