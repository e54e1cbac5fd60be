"""Where the shop's databases live: SQLite files by default, or PostgreSQL/MariaDB shards.

``EXAMPLE_DB=postgres`` puts the four shards on the local PostgreSQL server and
``EXAMPLE_DB=mysql`` on MariaDB (``default`` stays SQLite either way); the databases
are created when missing.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

BACKEND = os.environ.get("EXAMPLE_DB", "sqlite")
SHARDS = ["shard_0", "shard_1", "shard_2", "shard_3"]
DATA_DIR = Path(os.environ.get("EXAMPLE_DATA_DIR", Path(__file__).resolve().parent.parent / "var"))
POSTGRES_URL = os.environ.get(
    "UID_FIELDS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
MYSQL_URL = os.environ.get("UID_FIELDS_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")


def _sqlite(name: str) -> dict[str, object]:
    return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA_DIR / f"{name}.sqlite3")}


def _postgres(name: str) -> dict[str, object]:
    url = urlsplit(POSTGRES_URL)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": f"shop_{name}",
        "USER": url.username or "postgres",
        "PASSWORD": url.password or "",
        "HOST": url.hostname or "127.0.0.1",
        "PORT": url.port or 5432,
    }


def _mysql(name: str) -> dict[str, object]:
    import pymysql

    pymysql.install_as_MySQLdb()
    url = urlsplit(MYSQL_URL)
    return {
        "ENGINE": "django.db.backends.mysql",
        "NAME": f"shop_{name}",
        "USER": url.username or "root",
        "PASSWORD": url.password or "",
        "HOST": url.hostname or "127.0.0.1",
        "PORT": url.port or 3306,
        "OPTIONS": {"charset": "utf8mb4"},
    }


def databases() -> dict[str, dict[str, object]]:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    shard = {"sqlite": _sqlite, "postgres": _postgres, "mysql": _mysql}[BACKEND]
    config = {"default": _sqlite("default")}
    config.update({alias: shard(alias) for alias in SHARDS})
    return config


def create_missing() -> None:
    """Create the shard databases on the server if they do not exist yet."""
    if BACKEND == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for alias in SHARDS:
                name = f"shop_{alias}"
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [name]
                ).fetchone()
                if not exists:
                    conn.execute(f'CREATE DATABASE "{name}"')
    elif BACKEND == "mysql":
        import pymysql

        url = urlsplit(MYSQL_URL)
        conn = pymysql.connect(
            host=url.hostname or "127.0.0.1",
            port=url.port or 3306,
            user=url.username or "root",
            password=url.password or "",
        )
        with conn, conn.cursor() as cursor:
            for alias in SHARDS:
                cursor.execute(f"CREATE DATABASE IF NOT EXISTS shop_{alias} CHARACTER SET utf8mb4")
