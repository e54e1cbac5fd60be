"""The C ``next_id`` as a PostgreSQL extension, as a pip user gets it.

One command builds and installs the extension from what pip installed (the wheel's
``uid_fields/postgres/``, or ``postgres/`` of an unpacked sdist or a checkout); a superuser
runs ``CREATE EXTENSION uid_fields`` once per database; the application's ordinary role
then installs the per-table ``next_id`` functions (Django migration, Alembic operation).
What is missing (the preload, the extension, the right version) is said with its fix.
The extension's own SQL-visible behaviour is its pg_regress suite (``make installcheck``),
run here against a throwaway cluster that preloads the library.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import BigInteger, Column, create_engine, text
from sqlalchemy.exc import DBAPIError

import uid_fields.sqlalchemy.alembic  # noqa: F401 - registers op.install_next_id
from tests.postgres_servers import (
    PostgresCluster,
    c_library,
    create_extension,
    pg_config,
    postgres_cluster,
)
from uid_fields import INSTAGRAM
from uid_fields.sql.pg_extension import EXTENSION_VERSION, extension_problem
from uid_fields.sql.postgres import NextIdFunction
from uid_fields.sqlalchemy import DatabaseIds
from uid_fields.sqlalchemy.alembic import SHARD_OPTION, SHARDS_OPTION

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "postgres"
APP_ROLE = "uidf_app"


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster(*c_library()) as running:
        yield running


def _admin(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def _as_role(url: str, role: str = APP_ROLE) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://{role}@")


# -- the files ---------------------------------------------------------------------------
def test_the_extension_files_agree_on_one_version() -> None:
    control = (SOURCE / "uid_fields.control").read_text(encoding="utf-8")
    found = re.search(r"^default_version\s*=\s*'([^']+)'", control, re.M)
    assert found and found[1] == EXTENSION_VERSION
    assert (SOURCE / f"uid_fields--{EXTENSION_VERSION}.sql").is_file()
    assert f'#define UID_FIELDS_VERSION "{EXTENSION_VERSION}"' in (
        SOURCE / "uid_fields.c"
    ).read_text(encoding="utf-8")
    assert "shared_preload_libraries" in control
    # Every upgrade script leads from a shipped version to a shipped version.
    versions = {p.name.split("--")[1][:-4] for p in SOURCE.glob("uid_fields--*.sql")}
    for script in SOURCE.glob("uid_fields--*--*.sql"):
        old, new = script.name[len("uid_fields--") : -4].split("--")
        assert old in versions | {old} and new in versions, script.name


def test_newer_server_apis_are_guarded_by_the_version() -> None:
    """PostgreSQL 13 and 14 have no ``shmem_request_hook`` nor
    ``MarkGUCPrefixReserved``: each use sits under ``#if PG_VERSION_NUM >= 150000``."""
    guarded, depth = [], 0
    for line in (SOURCE / "uid_fields.c").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("#if PG_VERSION_NUM >= 150000"):
            depth += 1
        elif stripped.startswith("#endif") and depth:
            depth -= 1
        elif stripped.startswith("#else") and depth:
            depth = -depth
        for api in ("shmem_request_hook", "MarkGUCPrefixReserved"):
            if api in line and not stripped.startswith(("/*", "*")):
                guarded.append((api, depth > 0))
    assert guarded and all(inside for _, inside in guarded), guarded


def test_the_branch_for_older_servers_compiles(tmp_path: Path) -> None:
    """Only PostgreSQL 15's headers are here: the code for 13 and 14 (shared memory
    requested from _PG_init) is compiled against them with the guards turned off, so at
    least it builds warning-free (PostgreSQL 15 would refuse to run it)."""
    c_library()  # the server headers are there (or this is reported as missing)
    build = tmp_path / "postgres"
    shutil.copytree(SOURCE, build, ignore=shutil.ignore_patterns("*.so", "*.o", "*.bc"))
    source = build / "uid_fields.c"
    older = source.read_text(encoding="utf-8").replace("#if PG_VERSION_NUM >= 150000", "#if 0")
    assert older.count("#if 0") >= 2
    source.write_text(older, encoding="utf-8")
    done = subprocess.run(
        ["make", "-C", str(build), f"PG_CONFIG={pg_config()}", "with_llvm=no", "WERROR=-Werror"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# -- building and installing -------------------------------------------------------------
def _installed_files() -> list[Path]:
    share = Path(pg_config("--sharedir")) / "extension"
    return [
        share / "uid_fields.control",
        share / f"uid_fields--{EXTENSION_VERSION}.sql",
        Path(pg_config("--pkglibdir")) / "uid_fields.so",
    ]


def _run_command(python_path: Path | None, *args: str, cwd: Path) -> str:
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    done = subprocess.run(
        [sys.executable, "-m", "uid_fields", "pg-extension", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_one_command_builds_and_installs_it_from_the_sdist_and_from_the_wheel(
    tmp_path: Path,
) -> None:
    """As pip builds them (the sdist, then the wheel from the sdist); the wheel installed
    by pip into a directory of its own."""
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (sdist,) = (tmp_path / "dist").glob("uid_fields-*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("uid_fields-*.whl")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "sdist", filter="data")
    (unpacked,) = (tmp_path / "sdist").iterdir()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--target", str(tmp_path / "wheel"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )  # fmt: skip
    shipped = sorted(p.name for p in (tmp_path / "wheel" / "uid_fields" / "postgres").rglob("*"))
    for name in ("Makefile", "uid_fields.c", "uid_fields.control", "uid_fields.sql"):
        assert name in shipped, shipped
    for where in (unpacked, tmp_path / "wheel"):
        printed = _run_command(where, "--print-dir", cwd=tmp_path)
        assert Path(printed.strip()).is_relative_to(where), printed
        said = _run_command(where, "--install", "--pg-config", pg_config(), cwd=tmp_path)
        for path in _installed_files():
            assert path.is_file() and str(path) in said, (path, said)
    # the packaged source was built in a copy: nothing was written next to it
    assert not list((tmp_path / "wheel" / "uid_fields" / "postgres").glob("*.so"))


# -- the extension's own tests -----------------------------------------------------------
def test_the_regression_suite_passes(cluster: PostgresCluster, tmp_path: Path) -> None:
    """``make installcheck`` (pg_regress: postgres/sql, postgres/expected)."""
    build = tmp_path / "postgres"
    shutil.copytree(SOURCE, build, ignore=shutil.ignore_patterns("*.so", "*.o", "*.bc"))
    env = {
        **os.environ,
        "PGHOST": "127.0.0.1",
        "PGPORT": str(cluster.port),
        "PGUSER": "postgres",
    }
    # the library is built warning-free (what the installed one was built from)
    subprocess.run(
        ["make", "-C", str(build), f"PG_CONFIG={pg_config()}", "with_llvm=no", "WERROR=-Werror"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    done = subprocess.run(
        ["make", "-C", str(build), "installcheck", f"PG_CONFIG={pg_config()}", "with_llvm=no"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    diffs = build / "regression.diffs"
    report = diffs.read_text() if diffs.exists() else ""
    assert done.returncode == 0, done.stdout + done.stderr + report
    assert "uid_fields" in done.stdout and "ok" in done.stdout


# -- an ordinary role installs next_id -----------------------------------------------------
def _shard_databases(cluster: PostgresCluster, names: list[str]) -> list[str]:
    """Databases owned by the application's role, each with the extension a superuser
    created in it and its functions granted to that role."""
    with _admin(cluster.url) as admin:
        exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE])
        if exists.fetchone() is None:
            admin.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
        for name in names:
            admin.execute(f"CREATE DATABASE {name} OWNER {APP_ROLE}")
    urls = [cluster.database_url(name) for name in names]
    for url in urls:
        create_extension(url)
        # The extension's functions are not executable by PUBLIC (issue 37): the
        # superuser grants them to the application's role, as a deployment does.
        with _admin(url) as admin:
            admin.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO {APP_ROLE}")
    return urls


def test_the_django_migration_runs_as_an_ordinary_role_on_two_shards(
    cluster: PostgresCluster,
) -> None:
    urls = _shard_databases(cluster, ["uidf_dj_app_0", "uidf_dj_app_1"])
    done = subprocess.run(
        [sys.executable, "-m", "tests.pg_extension_django", *map(_as_role, urls)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    made = json.loads(done.stdout.strip().splitlines()[-1])
    shards = DatabaseIds(INSTAGRAM).shard_map(["shard_0", "shard_1"]).ranges
    for alias, ids in made.items():
        assert len(set(ids)) == len(ids) >= 10
        assert {INSTAGRAM.decompose(i).shard for i in ids} == {shards[alias][0]}
    with _admin(urls[0]) as conn:
        language = conn.execute(
            "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.oid = 'uid_next_id()'::regprocedure"
        ).fetchone()
        owner = conn.execute(
            "SELECT pg_get_userbyid(proowner) FROM pg_proc "
            "WHERE oid = 'uid_next_id()'::regprocedure"
        ).fetchone()
    assert language == ("sql",) and owner == (APP_ROLE,)


def test_the_alembic_operation_runs_as_an_ordinary_role_on_two_shards(
    cluster: PostgresCluster,
) -> None:
    names = ["uidf_sa_app_0", "uidf_sa_app_1"]
    urls = _shard_databases(cluster, names)
    ids = DatabaseIds(INSTAGRAM, language="c")
    made: dict[str, list[int]] = {}
    for name, url in zip(names, urls, strict=True):
        engine = create_engine(_as_role(url).replace("postgresql:", "postgresql+psycopg:"))
        try:
            with engine.begin() as connection:
                context = MigrationContext.configure(
                    connection, opts={SHARD_OPTION: name, SHARDS_OPTION: names}
                )
                op = Operations(context)
                op.install_next_id(ids)  # type: ignore[attr-defined]
                op.create_table(
                    "photos",
                    Column("id", BigInteger, primary_key=True, server_default=ids.server_default()),
                    Column("owner_id", BigInteger),
                )
                rows = connection.execute(
                    text("INSERT INTO photos (owner_id) SELECT g FROM generate_series(1, 100) g "
                         "RETURNING id")
                )  # fmt: skip
                made[name] = [int(row[0]) for row in rows]
        finally:
            engine.dispose()
    assert {INSTAGRAM.decompose(i).shard for i in made[names[0]]} == {0}
    assert {INSTAGRAM.decompose(i).shard for i in made[names[1]]} == {
        ids.shard_map(names).ranges[names[1]][0]
    }
    assert all(len(set(v)) == 100 for v in made.values())
    assert sum(map(len, made.values())) == 200


# -- what is missing is said with its fix --------------------------------------------------
def _install_error(url: str) -> str:
    engine = create_engine(url.replace("postgresql:", "postgresql+psycopg:"))
    try:
        with pytest.raises(DBAPIError) as raised, engine.begin() as connection:
            DatabaseIds(INSTAGRAM, language="c").install(connection, 1)
    finally:
        engine.dispose()
    return str(raised.value.orig)


def _problem(url: str) -> str | None:
    with _admin(url) as conn:
        return extension_problem(conn.cursor())


def test_a_database_without_the_extension_is_told_who_creates_it(
    cluster: PostgresCluster,
) -> None:
    url = cluster.create_database("uidf_no_extension")
    said = _install_error(url)
    assert "CREATE EXTENSION uid_fields" in said and "superuser" in said, said
    assert "uidf_no_extension" in said, said
    assert _problem(url) is not None and "CREATE EXTENSION uid_fields" in str(_problem(url))
    engine = create_engine(url.replace("postgresql:", "postgresql+psycopg:"))
    try:
        with (
            engine.connect() as connection,
            pytest.raises(RuntimeError, match="CREATE EXTENSION uid_fields"),
        ):
            DatabaseIds(INSTAGRAM, language="c").check_state(connection)
    finally:
        engine.dispose()
    create_extension(url)
    assert _problem(url) is None


def test_another_version_of_the_extension_is_refused_naming_both(
    cluster: PostgresCluster,
) -> None:
    """An extension created by an older package (its SQL at version 0.9)."""
    url = cluster.create_database("uidf_old_extension")
    create_extension(url)
    with _admin(url) as conn:
        conn.execute("UPDATE pg_extension SET extversion = '0.9' WHERE extname = 'uid_fields'")
    for said in (_install_error(url), str(_problem(url))):
        assert "0.9" in said and EXTENSION_VERSION in said, said
        assert "ALTER EXTENSION uid_fields UPDATE" in said, said


def test_a_library_of_another_version_is_refused_naming_both() -> None:
    """The server preloads a library built for version 0.9 (an older package's)."""
    c_library()
    library = Path(tempfile.mkdtemp(prefix="uidf-pglib-"))
    try:
        library.chmod(0o755)  # the server's user reads it
        build = library / "src"
        shutil.copytree(SOURCE, build, ignore=shutil.ignore_patterns("*.so", "*.o", "*.bc"))
        source = build / "uid_fields.c"
        current = source.read_text(encoding="utf-8")
        source.write_text(current.replace(f'"{EXTENSION_VERSION}"', '"0.9"'), encoding="utf-8")
        subprocess.run(
            ["make", "-C", str(build), f"PG_CONFIG={pg_config()}", "with_llvm=no"],
            check=True,
            capture_output=True,
            timeout=300,
        )
        shutil.copy(build / "uid_fields.so", library / "uid_fields.so")
        (library / "uid_fields.so").chmod(0o755)
        settings = ("shared_preload_libraries=uid_fields", f"dynamic_library_path='{library}'")
        with postgres_cluster(*settings) as older:
            url = older.create_database("uidf_old_library")
            for said in (_install_error(url), str(_problem(url))):
                assert "library version 0.9" in said and EXTENSION_VERSION in said, said
                assert "pg-extension --install" in said and "restart" in said, said
    finally:
        shutil.rmtree(library, ignore_errors=True)


def test_a_server_that_does_not_preload_the_library_is_told_so() -> None:
    c_library()  # installed, but this server does not preload it
    with postgres_cluster() as bare:
        url = bare.create_database("uidf_no_preload")
        said = _install_error(url)
        assert "shared_preload_libraries" in said and "uid_fields" in said, said
        assert "shared_preload_libraries" in str(_problem(url))
        with _admin(url) as conn, pytest.raises(psycopg.Error, match="shared_preload_libraries"):
            conn.execute("CREATE EXTENSION uid_fields")


def test_the_plpgsql_function_needs_no_extension(cluster: PostgresCluster) -> None:
    url = cluster.create_database("uidf_plpgsql_only")
    function = NextIdFunction(INSTAGRAM, shard=3)
    with _admin(url) as conn:
        for statement in function.create_statements():
            conn.execute(statement)
        made = conn.execute("SELECT uid_next_id()").fetchone()
    assert made is not None and INSTAGRAM.decompose(made[0]).shard == 3
