"""The fan-out pool's connections follow Django's lifecycle.

A parallel fan-out runs each shard's query on a thread of the core's pool
(``uid_fields.ops.parallel``), and Django's connections belong to the thread that opened
them: the end of a request closes the request thread's connections, never the pool's.
Left alone, every pool thread would keep its connections for the life of the process,
whatever ``CONN_MAX_AGE`` says.

So each request's start and end ask the pool threads that ran a query (and those whose
connections come of age) to do what Django does for the request's own thread
(``close_old_connections``): close a connection past ``CONN_MAX_AGE`` (with 0, at once),
one whose errors left it unusable, one left outside autocommit; and, with
``CONN_HEALTH_CHECKS``, check the one kept before its next query. Only a connection's
own thread may close it, so the core runs this on each pool thread (``parallel.tidy``).
A pool thread idle for a minute exits and closes its connections as well, requests or
not (management commands, Celery workers).
"""

from __future__ import annotations

from typing import Any

from django.core.signals import request_finished, request_started
from django.db import connections

from ...ops import parallel

__all__ = ["tidy_own_connections"]


def tidy_own_connections() -> float | None:
    """On a pool thread: Django's end-of-request rules for its own connections; the
    ``time.monotonic()`` moment the first one kept comes of age (None: never)."""
    due: float | None = None
    for connection in connections.all(initialized_only=True):
        connection.close_if_unusable_or_obsolete()
        at = connection.close_at if connection.connection is not None else None
        if at is not None:
            due = at if due is None else min(due, at)
    return due


def _request_boundary(**kwargs: Any) -> None:
    parallel.tidy()


parallel.on_worker_tidy(tidy_own_connections)
request_started.connect(_request_boundary, dispatch_uid="uid_fields.pool_connections.started")
request_finished.connect(_request_boundary, dispatch_uid="uid_fields.pool_connections.finished")
