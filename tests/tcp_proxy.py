"""A TCP proxy on loopback that a test can freeze: a server that stopped answering.

A stopped (SIGSTOP) or unreachable database server keeps its TCP connections open and
never answers; ``statement_timeout`` cannot help, since the server that would enforce it
is the one not running. ``FreezableProxy(port)`` forwards a free loopback port to
``127.0.0.1:port``; ``freeze()`` stops forwarding in both directions (connections stay
open, new ones are accepted and hang), ``thaw()`` resumes.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Iterator


class FreezableProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._running = threading.Event()
        self._running.set()  # forwarding
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self._running.clear()

    def thaw(self) -> None:
        self._running.set()

    def close(self) -> None:
        self._closed.set()
        self._running.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._closed.is_set():
            self._running.wait()
            try:
                ready, _, _ = select.select([source], [], [], 0.05)
                if not ready:
                    continue
                if not self._running.is_set():
                    continue  # frozen while waiting: leave the bytes unread
                data = source.recv(65536)
                if not data:
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                    return
                sink.sendall(data)
            except OSError:
                return


@contextlib.contextmanager
def freezable_proxy(target_port: int) -> Iterator[FreezableProxy]:
    proxy = FreezableProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()
