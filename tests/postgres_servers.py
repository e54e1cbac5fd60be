"""A throwaway PostgreSQL cluster on a free loopback port, for tests that need settings
the shared server does not have (``max_prepared_transactions`` for two-phase commit).

Debian's server binaries (``/usr/lib/postgresql/<version>/bin``) make the cluster in a
temporary directory; as root it runs as the ``postgres`` user, since PostgreSQL refuses
to run as root. Trust authentication, loopback only; removed when the test ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
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
    user: list[str] = []
    if os.geteuid() == 0:
        user = ["runuser", "-u", "postgres", "--"]
    root = Path(tempfile.mkdtemp(prefix="uidf-pg-"))
    data = root / "data"
    if user:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    cluster = PostgresCluster(data, port, bin_dir, user)
    try:
        cluster.run("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
        options = " ".join(
            [f"-p {port}", "-c listen_addresses=127.0.0.1", f"-k {root}", "-c fsync=off"]
            + [f"-c {s}" for s in settings]
        )
        cluster.run(
            "pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(cluster.url, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield cluster
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)
