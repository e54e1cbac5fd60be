"""One query on several PostgreSQL connections at once, from one thread (psycopg 3).

A fan-out that gives each shard a thread of its own pays, per shard, a hand-off to that
thread and the Python of a whole query under one GIL; on loopback, where a query waits
for the server some tens of microseconds, that is most of the time. libpq can do
better: send the query on every connection (each server starts at once), then read the
answers one after another, waiting on the sockets with a deadline. The SQL is bound
once (client-side, with the connection's own adapters) and the rows are loaded with
the connection's own loaders, so a row is what a psycopg cursor would have returned.

Only for idle connections (no transaction open: the SELECT runs as a transaction of its
own and leaves the connection idle again) not in a pipeline: a query sent below
psycopg's cursor must not interleave with one of its own. A connection whose answer is
not rows (an error) is reported as None: the caller runs the query there again the
usual way, which raises the driver's own exception.
"""

from __future__ import annotations

import select
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import FanOutTimeoutError
from . import dbapi

try:
    import psycopg
    from psycopg import ClientCursor, pq
    from psycopg.adapt import Transformer
except ImportError:  # pragma: no cover - psycopg is an optional dependency
    psycopg = None  # type: ignore[assignment]

__all__ = ["available", "bind", "fetch_at_once"]


def available(connection: object) -> bool:
    """Whether ``connection`` is a psycopg 3 connection this module can use now."""
    if psycopg is None or not isinstance(connection, psycopg.Connection):
        return False
    return bool(
        not connection.closed
        and connection.pgconn.transaction_status == pq.TransactionStatus.IDLE
        and connection.pgconn.pipeline_status == pq.PipelineStatus.OFF
    )


def bind(connection: Any, sql: str, params: Sequence[Any] | Mapping[str, Any]) -> bytes:
    """``sql`` with its ``%s`` (or ``%(name)s``) parameters bound as text, as psycopg's
    client-side cursor binds them (with the adapters of ``connection``)."""
    with ClientCursor(connection) as cursor:
        text: str = cursor.mogrify(sql, params)
    return text.encode(connection.info.encoding)


def fetch_at_once(
    connections: Sequence[Any], query: bytes, *, timeout: float | None, names: Sequence[str]
) -> list[list[tuple[Any, ...]] | None]:
    """The rows of ``query`` on each connection (each ``available``), sent to all before
    any answer is read; None where the answer was not rows. ``FanOutTimeoutError``
    names the connections (``names``) still busy after ``timeout`` seconds; their
    queries are cancelled on the server, their sockets are left as they are, and the
    caller must discard those connections."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for connection in connections:
        connection.pgconn.send_query(query)
    answers: list[list[tuple[Any, ...]] | None] = []
    late: list[str] = []
    for connection, name in zip(connections, names, strict=True):
        pgconn = connection.pgconn
        if not _wait(pgconn, deadline):
            late.append(name)
            answers.append(None)
            dbapi.cancel(connection)  # the query stops on the server too
            continue
        answers.append(_rows(connection, pgconn))
    if late:
        raise FanOutTimeoutError(
            f"no answer within {timeout:g} s from {', '.join(sorted(late))}: the fan-out "
            "gave up on them (their connections are discarded); raise FAN_OUT_TIMEOUT / "
            "fan_out_timeout= for slow queries",
            shards=sorted(late),
        )
    return answers


def _wait(pgconn: Any, deadline: float | None) -> bool:
    """Read ``pgconn``'s answer into libpq; False if the deadline passed first."""
    pgconn.consume_input()
    while pgconn.is_busy():
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        select.select([pgconn.socket], [], [], left)
        pgconn.consume_input()
    return True


def _rows(connection: Any, pgconn: Any) -> list[tuple[Any, ...]] | None:
    result = pgconn.get_result()
    while pgconn.get_result() is not None:  # the end of the answer: the connection is idle
        pass
    if result is None or result.status != pq.ExecStatus.TUPLES_OK:
        return None
    loader = Transformer(connection)
    loader.set_pgresult(result)
    rows: list[tuple[Any, ...]] = loader.load_rows(0, result.ntuples, tuple)
    return rows
