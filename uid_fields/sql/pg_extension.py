"""The ``uid_fields`` PostgreSQL extension: the C ``next_id`` behind ``"next_id_language": "c"``.

Its source (``postgres/`` of the repository and the sdist, ``uid_fields/postgres/`` of the
wheel) is a PGXS extension: a library the server must preload
(``shared_preload_libraries``), a control file and versioned SQL scripts. A superuser runs
``CREATE EXTENSION uid_fields`` once per database; the application's own role then
creates its per-table functions in SQL, calling ``uid_fields.next_id(...)``: no superuser
right, so managed services and ordinary migration roles can install them wherever the
extension is there.

Four things can be wrong on a database, each with its own fix, and both the install (a
statement run before the functions are created, so every adapter and ``sqlmigrate`` get
it) and ``check-db`` ask the same one query: the library is not preloaded, the library
or the extension's SQL is of another version than this package's, the extension was
never created in this database, or the role may not execute its functions.

Privileges (since 1.1, issue 37). The extension's functions that read or move a state are
not executable by PUBLIC: the server's table of states is shared by every database, and
any role with a login could fill it. A superuser grants them (``GRANT EXECUTE ON ALL
FUNCTIONS IN SCHEMA uid_fields TO <role>``); an install run by a role that may grant
them (a superuser, or a role granted them ``WITH GRANT OPTION``) grants them to the
owners of the per-table functions and of the state sequence (``grant_statement``), and
an install by a role that may not run them stops naming that GRANT.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "EXTENSION",
    "EXTENSION_VERSION",
    "NEXT_ID_SIGNATURE",
    "build_and_install",
    "check_statement",
    "extension_problem",
    "grant_statement",
    "problem_query",
    "source_dir",
]

#: The extension's name, its library's and its schema's.
EXTENSION = "uid_fields"
#: The version of the extension this package's SQL calls: the control file's
#: ``default_version`` and the library's ``UID_FIELDS_VERSION``.
EXTENSION_VERSION = "1.1"
#: The extension's ``next_id``, as ``has_function_privilege`` names it.
NEXT_ID_SIGNATURE = (
    f"{EXTENSION}.next_id(regclass, integer, bigint, bigint, integer, integer, integer, "
    "bigint, integer, bigint, bigint)"
)

_COMMAND = "python -m uid_fields pg-extension --install"
_PRELOAD = (
    f"add {EXTENSION} to shared_preload_libraries in postgresql.conf "
    f"(shared_preload_libraries = ''{EXTENSION}'') and restart the server"
)


def _literal(text: str) -> str:
    return "'" + text + "'"


def problem_query() -> str:
    """One SELECT whose one value is NULL when this database can run the C ``next_id`` of
    this package, else what is wrong and how to fix it (no error either way)."""
    v = EXTENSION_VERSION
    not_loaded = (
        f"uid_fields: the C next_id needs the {EXTENSION} library, which this server does "
        f"not load: build and install it ({_COMMAND}), {_PRELOAD}, then a superuser runs "
        f"CREATE EXTENSION {EXTENSION}; in each database (or keep next_id_language "
        "plpgsql, which needs no extension)"
    )
    other_library = (
        f"the server loaded the {EXTENSION} library version ' || found.library || ', and "
        f"this uid_fields package needs version {v}: install the package''s extension "
        f"({_COMMAND}), restart the server, then a superuser runs ALTER EXTENSION "
        f"{EXTENSION} UPDATE TO ''{v}''; in each database"
    )
    missing = (
        f"the {EXTENSION} extension is not created in database ' || "
        f"quote_ident(current_database()) || ': a superuser runs CREATE EXTENSION "
        f"{EXTENSION}; in it once (the library is loaded), then the application''s role "
        "installs next_id again"
    )
    other_sql = (
        f"database ' || quote_ident(current_database()) || ' has the {EXTENSION} extension "
        f"version ' || found.extension || ', and this uid_fields package needs version {v}: "
        f"a superuser runs ALTER EXTENSION {EXTENSION} UPDATE TO ''{v}''; in it (after "
        f"{_COMMAND} and a restart if the server lacks that version), or install the "
        "uid_fields package that matches the extension"
    )
    not_granted = (
        f"role ' || quote_ident(current_user) || ' may not execute the {EXTENSION} "
        f"extension''s functions (since version 1.1 they are not granted to PUBLIC): a "
        f"superuser runs GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {EXTENSION} TO ' || "
        "quote_ident(current_user) || '; in database ' || quote_ident(current_database()) "
        "|| ', then the application''s role installs next_id again"
    )
    return (
        "SELECT CASE "
        f"WHEN found.library IS NULL THEN {_literal(not_loaded)} "
        f"WHEN found.library <> '{v}' THEN 'uid_fields: ' || {_literal(other_library)} "
        f"WHEN found.extension IS NULL THEN 'uid_fields: ' || {_literal(missing)} "
        f"WHEN found.extension <> '{v}' THEN 'uid_fields: ' || {_literal(other_sql)} "
        f"WHEN NOT has_function_privilege('{NEXT_ID_SIGNATURE}', 'EXECUTE') "
        f"THEN 'uid_fields: ' || {_literal(not_granted)} "
        "END FROM (SELECT "
        f"current_setting('{EXTENSION}.loaded_version', true) AS library, "
        f"(SELECT extversion FROM pg_extension WHERE extname = '{EXTENSION}') AS extension"
        ") AS found"
    )


def check_statement() -> str:
    """A statement that fails with ``problem_query``'s answer when there is one: run
    before the C function's per-table functions are created."""
    return (
        "DO $uid_check$ DECLARE problem text; BEGIN "
        f"problem := ({problem_query()}); "
        "IF problem IS NOT NULL THEN RAISE EXCEPTION USING MESSAGE = problem, "
        "ERRCODE = 'object_not_in_prerequisite_state'; END IF; END $uid_check$"
    )


def grant_statement(owned: list[str]) -> str:
    """A statement that grants the extension's functions to the owner of each object of
    ``owned`` (``"pg_proc"``/``"pg_class"`` and a name in the current schema, as
    ``"pg_proc:name()"``) that may not execute them yet, when the running role may grant
    them; a WARNING naming the superuser's GRANT when it may not."""
    sources = []
    for item in owned:
        catalog, name = item.split(":", 1)
        if catalog == "pg_proc":
            sources.append(
                "SELECT proowner FROM pg_proc WHERE oid = "
                f"to_regprocedure(quote_ident(current_schema()) || '.{name}')"
            )
        else:
            sources.append(
                "SELECT relowner FROM pg_class WHERE oid = "
                f"to_regclass(quote_ident(current_schema()) || '.{name}')"
            )
    owners = " UNION ".join(sources)
    return (
        "DO $uid_grant$ DECLARE grantee name; BEGIN "
        f"FOR grantee IN SELECT pg_get_userbyid(o.owner) FROM ({owners}) AS o(owner) "
        f"WHERE NOT has_function_privilege(o.owner, '{NEXT_ID_SIGNATURE}', 'EXECUTE') LOOP "
        f"IF has_function_privilege('{NEXT_ID_SIGNATURE}', 'EXECUTE WITH GRANT OPTION') THEN "
        f"EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {EXTENSION} TO %I', grantee); "
        "ELSE RAISE WARNING USING MESSAGE = format('uid_fields: role %I, which owns this "
        f"database''s next_id, may not execute the {EXTENSION} extension''s functions: a "
        f"superuser runs GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {EXTENSION} TO %I;', "
        "grantee, grantee); END IF; END LOOP; END $uid_grant$"
    )


def extension_problem(cursor: Any) -> str | None:
    """What keeps the cursor's database from the C ``next_id`` (None: nothing)."""
    cursor.execute(problem_query())
    row = cursor.fetchone()
    return None if row is None or row[0] is None else str(row[0])


# -- building ------------------------------------------------------------------------------
def source_dir() -> Path:
    """The extension's source: ``uid_fields/postgres/`` of an installed wheel, or
    ``postgres/`` beside the package in a checkout or an unpacked sdist."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "postgres", package.parent / "postgres"):
        if (candidate / f"{EXTENSION}.control").is_file():
            return candidate
    raise FileNotFoundError(f"the {EXTENSION} extension's source is not beside {package}")


def _pg_config(pg_config: str | None) -> str:
    found = shutil.which(pg_config or "pg_config")
    if found is None:
        raise RuntimeError(
            f"pg_config not found ({pg_config or 'on PATH'}): install the PostgreSQL "
            "server headers (Debian, Ubuntu: postgresql-server-dev-<major>; RHEL: "
            "postgresql<major>-devel) or pass --pg-config /path/to/pg_config"
        )
    return found


def _setting(pg_config: str, option: str) -> str:
    done = subprocess.run([pg_config, option], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def build_and_install(pg_config: str | None = None) -> list[Path]:
    """Build the extension from ``source_dir()`` in a temporary copy (the installed
    package stays as it is) with PGXS against ``pg_config``'s server, install it
    there (``make install``: usually needs root), and return the installed files."""
    config = _pg_config(pg_config)
    pgxs = _setting(config, "--pgxs")
    if not Path(pgxs).is_file():
        version = _setting(config, "--version")
        raise RuntimeError(
            f"{version} has no extension build files ({pgxs}): install its server headers "
            "(Debian, Ubuntu: postgresql-server-dev-<major>; RHEL: postgresql<major>-devel)"
        )
    if shutil.which("make") is None:
        raise RuntimeError("make not found: install make and a C compiler")
    with tempfile.TemporaryDirectory(prefix="uid-fields-pg-") as scratch:
        build = Path(scratch) / EXTENSION
        shutil.copytree(
            source_dir(),
            build,
            ignore=shutil.ignore_patterns("*.o", "*.so", "*.bc", "results", "regression.*"),
        )
        # with_llvm=no: no JIT bitcode (it needs clang, and next_id gains nothing from it)
        done = subprocess.run(
            ["make", "-C", str(build), f"PG_CONFIG={config}", "with_llvm=no", "install"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(
                f"building the {EXTENSION} extension failed:\n{done.stdout}{done.stderr}"
            )
        scripts = sorted(p.name for p in build.glob(f"{EXTENSION}--*.sql"))
    share = Path(_setting(config, "--sharedir")) / "extension"
    return [
        Path(_setting(config, "--pkglibdir")) / f"{EXTENSION}.so",
        share / f"{EXTENSION}.control",
        *(share / name for name in scripts),
    ]
