"""The fence translator and the write watcher join a connection's execute wrappers
without disturbing a user's ``connection.execute_wrapper()`` block that opened it."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test.utils import override_settings

from uid_fields.django.connections.fences import FENCE_TRANSLATOR
from uid_fields.django.connections.replicas import WRITE_WATCHER

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__", transaction=True)]


def mine(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    return execute(sql, params, many, context)


def with_a_replica() -> override_settings:
    """shard_1 with a replica: its connections get both wrappers."""
    config = copy.deepcopy(settings.UID_FIELDS)
    config["SHARDS"]["main"]["replicas"] = {"shard_1": ["shard_1_r1"]}
    return override_settings(UID_FIELDS=config)


@with_a_replica()
def test_a_connection_first_opened_inside_a_users_wrapper_keeps_both_in_place() -> None:
    found: dict[str, Any] = {}

    def thread() -> None:  # a thread's first connection: its wrapper list starts empty
        connection = connections["shard_1"]
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


@with_a_replica()
def test_only_shard_connections_get_the_wrappers_and_only_those_they_need() -> None:
    """A fence can only be on a shard database and a pin only on a primary with
    replicas: ``default`` keeps Django's execution, a shard without replicas the fence's
    translator alone (issue 36, item 1)."""
    found: dict[str, list[Any]] = {}

    def thread() -> None:
        for alias in ("default", "shard_0", "shard_1"):
            connection = connections[alias]
            try:
                connection.ensure_connection()
                found[alias] = list(connection.execute_wrappers)
            finally:
                connection.close()

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join()
    assert found["default"] == []
    assert found["shard_0"] == [FENCE_TRANSLATOR]
    assert found["shard_1"] == [WRITE_WATCHER, FENCE_TRANSLATOR]
