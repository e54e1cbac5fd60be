"""A throwaway PostgreSQL cluster on a free loopback port, for tests that need settings
the shared server does not have (``max_prepared_transactions`` for two-phase commit).

Debian's server binaries (``/usr/lib/postgresql/<version>/bin``) make the cluster in a
temporary directory; as root it runs as the ``postgres`` user, since PostgreSQL refuses
to run as root. Trust authentication, loopback only; removed when the test ends.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests import services
from tests.redis_servers import free_port


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresCluster:
    def __init__(self, directory: Path, port: int, bin_dir: Path, user: list[str]) -> None:
        self.directory = directory
        self.port = port
        self.bin_dir = bin_dir
        self._user = user
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._start: list[str] = []

    def crash_and_restart(self) -> None:
        """Stop the server as a crash would (``-m immediate``: no shutdown checkpoint,
        shared memory gone), then start it again with the same settings."""
        self.stop()
        self.start()

    def stop(self) -> None:
        """Stop the server as a crash would: every connection to it fails from now on."""
        self.run("pg_ctl", "-D", str(self.directory), "-m", "immediate", "stop")

    def start(self) -> None:
        """Start a stopped server again, with the same settings and port."""
        self.run(*self._start)
        _wait_for(self)

    def run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._user, str(self.bin_dir / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)


@contextmanager
def postgres_cluster(*settings: str) -> Iterator[PostgresCluster]:
    """A running cluster with ``settings`` (``"name=value"``) on its command line."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        services.unavailable("initdb", FileNotFoundError("PostgreSQL server binaries"))
    user = _server_user()
    with _directory(user) as root:
        cluster = PostgresCluster(root / "data", free_port(), bin_dir, user)
        cluster.run(
            "initdb", "-D", str(cluster.directory), "-U", "postgres", "-A", "trust", "--no-sync"
        )
        with _running(cluster, root, settings):
            yield cluster


@contextmanager
def streaming_replica(primary: PostgresCluster) -> Iterator[PostgresCluster]:
    """A hot standby of ``primary`` (``pg_basebackup -R``: physical streaming
    replication) on another free loopback port; read-only, a little behind."""
    with _directory(primary._user) as root:
        replica = PostgresCluster(root / "data", free_port(), primary.bin_dir, primary._user)
        replica.run(
            "pg_basebackup", "-D", str(replica.directory), "-R", "-X", "stream",
            "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres", "--no-sync",
            "--checkpoint=fast",
        )  # fmt: skip
        with _running(replica, root, ("hot_standby=on",)):
            yield replica


def wait_for_replay(primary_url: str, replica_url: str, timeout: float = 30.0) -> None:
    """Until the replica has replayed everything the primary has written so far."""
    with psycopg.connect(primary_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert row is not None
        target = row[0]
    deadline = time.monotonic() + timeout
    with psycopg.connect(replica_url, autocommit=True) as conn:
        while True:
            done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target])
            if (done.fetchone() or [False])[0]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the replica did not replay up to {target}")
            time.sleep(0.02)


@contextmanager
def busy_commit(cluster: PostgresCluster, database: str, gid: str) -> Iterator[None]:
    """A session committing prepared transaction ``gid`` that cannot finish yet, while
    the block runs: the server waits for a synchronous standby that does not exist.
    Another ``COMMIT PREPARED`` of it meanwhile fails with "prepared transaction ... is
    busy" (what recovery meets when a live coordinator is committing). Sessions of the
    block that commit must set ``synchronous_commit = local``, or they wait too. At the
    end the wait is cancelled (the commit is then done locally) and the setting undone.
    """
    with psycopg.connect(cluster.url, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        admin.execute("SELECT pg_reload_conf()")
        committer = psycopg.connect(cluster.database_url(database), autocommit=True)
        pid = committer.info.backend_pid
        thread = threading.Thread(
            target=committer.execute, args=(f"COMMIT PREPARED '{gid}'",), daemon=True
        )
        try:
            thread.start()
            deadline = time.monotonic() + 30
            while True:
                row = admin.execute(
                    "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
                if row and row[0] == "SyncRep":
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("the commit did not start waiting for a standby")
                time.sleep(0.02)
            yield
        finally:
            admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
            admin.execute("SELECT pg_reload_conf()")
            admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
            thread.join(30)
            committer.close()


def _server_user() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@contextmanager
def _directory(user: list[str]) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="uidf-pg-"))
    if user:
        shutil.chown(root, "postgres", "postgres")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _running(cluster: PostgresCluster, root: Path, settings: Sequence[str]) -> Iterator[None]:
    data, port = cluster.directory, cluster.port
    options = " ".join(
        [f"-p {port}", "-c listen_addresses=127.0.0.1", f"-k {root}", "-c fsync=off"]
        + [f"-c {s}" for s in settings]
    )
    cluster._start = [
        "pg_ctl",
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(root / "log"),
        "-w",
        "start",
    ]
    try:
        cluster.run(*cluster._start)
        _wait_for(cluster)
        yield
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*cluster._user, str(cluster.bin_dir / "pg_ctl"), "-D", str(data), "-m",
                 "immediate", "stop"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )  # fmt: skip


def _wait_for(cluster: PostgresCluster) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(cluster.url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


#: The project's C ``next_id``: the ``uid_fields`` extension (``postgres/``).
C_SOURCE = Path(__file__).resolve().parents[1] / "postgres"


def pg_config(option: str | None = None) -> str:
    """The path of ``pg_config`` (on PATH), or what it prints for ``option``."""
    found = shutil.which("pg_config") or "pg_config"
    if option is None:
        return found
    return subprocess.run(
        [found, option], capture_output=True, text=True, check=True
    ).stdout.strip()


def c_library() -> tuple[str, ...]:
    """Build and install the ``uid_fields`` extension now (as a user does:
    ``python -m uid_fields pg-extension --install``) and return the server settings that
    preload it; a skip, or a failure under UID_FIELDS_REQUIRE_SERVICES=1, when the server
    headers are not installed."""
    settings = build_c_library()
    if settings is None:
        services.unavailable(
            "PostgreSQL's extension build files (postgresql-server-dev)",
            FileNotFoundError("pg_config --pgxs, postgres.h"),
        )
    return settings


@functools.cache
def build_c_library() -> tuple[str, ...] | None:
    """``c_library()`` for the benchmarks: None when the server headers are missing.
    Installed once per process (every fixture that starts a server asks), under a lock:
    parallel test runs on this machine install into the same server directories (the
    installed files replace the old ones whole, so running servers keep theirs)."""
    if not shutil.which("pg_config"):
        return None
    # PGXS's makefiles come with the client package; the headers with the server's dev one
    headers = Path(pg_config("--includedir-server")) / "postgres.h"
    if not Path(pg_config("--pgxs")).exists() or not headers.exists():
        return None
    lock = Path(tempfile.gettempdir()) / "uid-fields-pg-extension.lock"
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            subprocess.run(
                [sys.executable, "-m", "uid_fields", "pg-extension", "--install"],
                check=True,
                capture_output=True,
                timeout=300,
                cwd=C_SOURCE.parent,
                env={**os.environ, "PYTHONPATH": str(C_SOURCE.parent)},
            )
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    return ("shared_preload_libraries=uid_fields",)


def create_extension(url: str) -> None:
    """``CREATE EXTENSION uid_fields`` in the database of ``url`` (as its superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS uid_fields")
