"""Interrupting a DB-API connection from another thread, and where it was opened to.

A query blocked on a frozen server (stopped, or behind a dead network path) waits in a
socket read that no ``statement_timeout`` ends: the server that would enforce it is the
one not answering. Shutting the socket down from the waiting thread makes the read
return at once, with an error, in the thread that is stuck; the connection is then
unusable and is discarded. Drivers known here: psycopg 3 and PyMySQL.
"""

from __future__ import annotations

import os
import socket

__all__ = ["interrupt", "tcp_port"]


def interrupt(connection: object) -> bool:
    """Shut down the socket under ``connection``; whether a socket was found."""
    pgconn = getattr(connection, "pgconn", None)  # psycopg 3
    if pgconn is not None:
        fd = pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
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
