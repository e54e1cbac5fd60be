"""A throwaway PgBouncer in transaction pooling mode in front of the test PostgreSQL.

``running_pgbouncer()`` starts Debian's ``pgbouncer`` on a free loopback port, every
database name passed through to the server (``* = host=... port=...``), and stops it
when the block ends. Transaction mode is how many shard databases are usually run: a
client holds a server connection only for a transaction, so two statements of one
client outside a transaction may run on two server connections, and a session's state
(a ``WITH HOLD`` cursor, a prepared statement) is seen by whoever gets that connection
next, and the next statement of a client may find another server connection.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from tests.services import POSTGRES_URL, unavailable


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_pgbouncer(*, pool_size: int = 1) -> Iterator[int]:
    """PgBouncer's port while the block runs (a skip, or a failure under
    UID_FIELDS_REQUIRE_SERVICES=1, when the program is not installed)."""
    program = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )
    if program is None:
        unavailable(
            "PgBouncer", FileNotFoundError("no pgbouncer program (Debian: apt install pgbouncer)")
        )
    server = urlsplit(POSTGRES_URL)
    user = server.username or "postgres"
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="uidf-pgbouncer-"))
    folder.chmod(0o777)  # run as root, pgbouncer switches to the server's user
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
    )
    for path in folder.iterdir():
        path.chmod(0o666)
    command = [program, *(["-u", user] if os.geteuid() == 0 else []), str(folder / "pgbouncer.ini")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(port, process, folder)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for(port: int, process: subprocess.Popen[bytes], folder: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = (
                (folder / "pgbouncer.log").read_text()
                if (folder / "pgbouncer.log").exists()
                else ""
            )
            raise RuntimeError(
                f"pgbouncer exited: {process.stderr.read().decode() if process.stderr else ''}{log}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"pgbouncer did not listen on 127.0.0.1:{port} within 15 s")
