"""Interrupting a DB-API connection from another thread, and where it was opened to.

A query blocked on a frozen server (stopped, or behind a dead network path) waits in a
socket read that no ``statement_timeout`` ends: the server that would enforce it is the
one not answering. Shutting the socket down from the waiting thread makes the read
return at once, with an error, in the thread that is stuck; the connection is then
unusable and is discarded. Drivers known here: psycopg 3 and PyMySQL.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from typing import Any

try:
    from psycopg import pq
except ImportError:  # pragma: no cover - psycopg is an optional dependency
    pq = None  # type: ignore[assignment]

__all__ = ["cancel", "interrupt", "tcp_port"]


def interrupt(connection: object) -> bool:
    """Shut down the socket under ``connection``, then ask the server to cancel the
    query that ran on it (PostgreSQL); whether a socket was found. The socket goes
    first: the thread reading it then fails as on a lost connection, and its pool
    discards the connection, where an error of the cancelled query alone would give
    it back to the pool."""
    pgconn = getattr(connection, "pgconn", None)  # psycopg 3
    if pgconn is not None:
        request = _cancel_request(pgconn)
        fd = pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
        _send(request)
        return True
    mysql_socket = getattr(connection, "_sock", None)  # PyMySQL
    if isinstance(mysql_socket, socket.socket):
        mysql_socket.shutdown(socket.SHUT_RDWR)
        return True
    return False


def tcp_port(connection: object) -> int | None:
    """The TCP port a psycopg connection was opened to; None for a Unix socket or a
    driver that does not say (a move compares it with the server's own port)."""
    info = getattr(connection, "info", None)
    host, port = getattr(info, "host", ""), getattr(info, "port", None)
    return int(port) if port and host and not str(host).startswith("/") else None


def cancel(connection: object) -> None:
    """Ask the server to cancel the query running on a psycopg connection, so that a
    fan-out that gave up leaves no backend working for it: shutting the socket alone
    does not, the server goes on until it has a row to send. The caller discards the
    connection."""
    pgconn = getattr(connection, "pgconn", None)
    if pgconn is not None:
        _send(_cancel_request(pgconn))


def _cancel_request(pgconn: Any) -> Any:
    """A cancel request for the connection (made while the connection is whole), or
    None. libpq 17's can be sent without blocking, with a deadline; an older libpq's
    blocks the thread (and psycopg's C build holds the GIL meanwhile, which a frozen
    server would make forever), so it is used only by psycopg's pure Python build."""
    try:
        if pq is not None and pq.version() >= 170000:
            return pgconn.cancel_conn()
        if pq is not None and pq.__impl__ == "python":
            return pgconn.get_cancel()
    except Exception:  # a connection already closed or broken: nothing runs there
        pass
    return None


#: How long a cancel request may take to reach the server before it is given up.
CANCEL_TIMEOUT_S = 5.0


def _send(request: Any) -> None:
    """Send a cancel request over a connection of its own, from a daemon thread that
    nobody waits for: a frozen server never answers it."""
    if request is None:
        return
    threading.Thread(
        target=_deliver, args=(request,), name="uid_fields-cancel", daemon=True
    ).start()


def _deliver(request: Any) -> None:
    with contextlib.suppress(Exception):  # the server is gone: so is its query
        if not hasattr(request, "poll"):
            request.cancel()  # an older libpq's blocking request
            return
        deadline = time.monotonic() + CANCEL_TIMEOUT_S
        try:
            request.start()
            while (status := request.poll()) not in (pq.PollingStatus.OK, pq.PollingStatus.FAILED):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                reading = status == pq.PollingStatus.READING
                fd = request.socket
                select.select([fd] if reading else [], [] if reading else [fd], [], left)
        finally:
            request.finish()
