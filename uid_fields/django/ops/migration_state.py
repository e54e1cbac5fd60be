"""Which migrations each database has applied, and what ``migrate-all`` did on each.

``manage.py migrate`` migrates one database (``default`` unless ``--database`` says
otherwise) and says "OK": the shard databases are left without what it applied. Each
database keeps its own record of applied migrations, so this module compares them:
``lag`` says what one database lacks (relative to ``default``, and to the migrations on
disk), which the system check ``uid_fields.W003`` and ``manage.py uid_fields migrate-all
--check`` report; ``migrate_each`` runs ``migrate`` on every database, goes on past a
shard that fails, and says for each what was applied or where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.models.signals import post_migrate
from django.dispatch import receiver

from ..compat import MigrationKey, migration_progress
from ..conf import shard_databases

__all__ = [
    "Lag",
    "MigrateResult",
    "applied_on_default",
    "lag",
    "migrate_database",
    "migrate_each",
    "migrated_databases",
]

#: At most this many migration names in one line; the rest are counted.
SHOWN = 10


def names(keys: Iterable[MigrationKey]) -> str:
    """``app.name`` of each migration, the first ``SHOWN`` of them."""
    keys = list(keys)
    text = ", ".join(f"{app}.{name}" for app, name in keys[:SHOWN])
    more = len(keys) - SHOWN
    return f"{text} and {more} more" if more > 0 else text


def migrated_databases() -> list[str]:
    """What ``migrate-all`` migrates: ``default`` first (the reference the shards are
    compared with), then every database of a shard map, incoming ones too, by name."""
    others = sorted(alias for alias in shard_databases() if alias != DEFAULT_DB_ALIAS)
    return [DEFAULT_DB_ALIAS, *others]


def applied_on_default() -> set[MigrationKey]:
    applied, _, _ = migration_progress(connections[DEFAULT_DB_ALIAS])
    return applied


@dataclass(frozen=True)
class Lag:
    """What one database lacks.

    ``behind_default``: migrations ``default`` has applied and this database has not
    (what a plain ``migrate`` leaves behind). ``unapplied``: every migration on disk it
    has not applied, in the order ``migrate`` would apply them (those too).
    """

    alias: str
    behind_default: tuple[MigrationKey, ...]
    unapplied: tuple[MigrationKey, ...]

    @property
    def up_to_date(self) -> bool:
        return not self.unapplied and not self.behind_default

    def __str__(self) -> str:
        parts = []
        if self.behind_default:
            parts.append(
                f"behind default by {len(self.behind_default)}: {names(self.behind_default)}"
            )
        others = [key for key in self.unapplied if key not in self.behind_default]
        if others:
            parts.append(f"{len(others)} unapplied: {names(others)}")
        return "; ".join(parts) or "up to date"


def lag(alias: str, default_applied: set[MigrationKey]) -> Lag:
    """What ``alias`` lacks, given what ``default`` has applied (``applied_on_default``).

    Reads the database's ``django_migrations`` table (a database never migrated lacks
    everything); a ``DatabaseError`` when it cannot be reached.
    """
    _, plan, _ = migration_progress(connections[alias])
    if alias == DEFAULT_DB_ALIAS:
        behind: tuple[MigrationKey, ...] = ()
    else:
        behind = tuple(key for key in plan if key in default_applied)
    return Lag(alias, behind, tuple(plan))


@dataclass(frozen=True)
class MigrateResult:
    """What ``migrate`` did on one database.

    ``applied``: the migrations it applied; ``unapplied``: the ones it unapplied (a
    migration name behind the database's state migrates backwards). On a failure,
    ``error`` is the exception in one line, ``failed_at`` the first migration it lacks
    afterwards (the one that failed, when ``migrate`` got that far) and ``stopped_at``
    that migration's applied parents in its own app (where the app stands). ``skipped``
    says why it was not migrated at all.
    """

    alias: str
    applied: tuple[MigrationKey, ...] = ()
    error: str | None = None
    failed_at: MigrationKey | None = None
    stopped_at: tuple[MigrationKey, ...] = ()
    skipped: str | None = None
    unapplied: tuple[MigrationKey, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and self.skipped is None

    def __str__(self) -> str:
        if self.skipped is not None:
            return f"skipped: {self.skipped}"
        done = "; ".join(
            f"{verb} {len(keys)}: {names(keys)}"
            for verb, keys in (("applied", self.applied), ("unapplied", self.unapplied))
            if keys
        )
        if self.error is None:
            return f"OK, {done}" if done else "OK, up to date"
        where = ""
        if self.failed_at is not None:
            at = names(self.stopped_at) or f"no {self.failed_at[0]} migration"
            where = f" at {names([self.failed_at])} (stopped after {at})"
        return f"FAILED{where}: {self.error}" + (f"; before it {done}" if done else "")


def _one_line(exc: BaseException, limit: int = 500) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def migrate_database(alias: str, **options: Any) -> MigrateResult:
    """``manage.py migrate --database alias`` (``options`` go to it), caught and told.

    Any exception of the run is the result's ``error``, so the caller can go on with the
    next database; what was applied is read back from the database afterwards.
    """
    connection = connections[alias]
    before: list[MigrationKey] = []
    applied_before: set[MigrationKey] = set()
    parents: dict[MigrationKey, set[MigrationKey]] = {}
    error: str | None = None
    try:
        applied_before, before, parents = migration_progress(connection)
        call_command("migrate", database=alias, interactive=False, **options)
    except Exception as exc:
        error = _one_line(exc)
    try:
        applied_now, _, _ = migration_progress(connection)
    except DatabaseError:
        applied_now = applied_before  # unreadable now: claim nothing was unapplied
    applied = tuple(key for key in before if key in applied_now)
    # Backwards (a migration name behind the state): what was applied and is no longer,
    # named so a summary never says "up to date" for a database it changed.
    unapplied = tuple(sorted(applied_before - applied_now))
    if error is None:
        return MigrateResult(alias, applied, unapplied=unapplied)
    failed_at = next((key for key in before if key not in applied_now), None)
    stopped_at: tuple[MigrationKey, ...] = ()
    if failed_at is not None:
        stopped_at = tuple(
            sorted(
                p for p in parents.get(failed_at, ()) if p[0] == failed_at[0] and p in applied_now
            )
        )
    return MigrateResult(alias, applied, error, failed_at, stopped_at, unapplied=unapplied)


def migrate_each(
    aliases: Iterable[str],
    *,
    on_start: Callable[[int, str], None] | None = None,
    **options: Any,
) -> list[MigrateResult]:
    """``migrate`` on each database in turn; one result each.

    A shard that fails does not stop the others: each shard's migrations run in their
    own transactions, and the summary says where every one of them stands. A failure on
    ``default`` does: the shards are compared with ``default``, and a data migration may
    read what ``default`` was to have first.
    """
    results: list[MigrateResult] = []
    token = _in_migrate_all.set(True)
    try:
        _migrate_in_turn(list(aliases), results, on_start, options)
    finally:
        _in_migrate_all.reset(token)
    return results


def _migrate_in_turn(
    aliases: list[str],
    results: list[MigrateResult],
    on_start: Callable[[int, str], None] | None,
    options: dict[str, Any],
) -> None:
    for done, alias in enumerate(aliases):
        first = results[0] if results else None
        if first is not None and first.alias == DEFAULT_DB_ALIAS and not first.ok:
            results.append(MigrateResult(alias, skipped="default failed; fix it first"))
            continue
        if on_start is not None:
            on_start(done, alias)
        results.append(migrate_database(alias, **options))


#: Set while ``migrate_each`` runs: its own summary says where each database stands.
_in_migrate_all: ContextVar[bool] = ContextVar("uid_fields_in_migrate_all", default=False)


def _readable(alias: str) -> bool:
    """False for a SQLite file that does not exist: reading it would create it (while a
    test database is being made, a shard's alias still names the real file)."""
    connection = connections[alias]
    if connection.vendor != "sqlite":
        return True
    name = str(connection.settings_dict.get("NAME") or "")
    return name == ":memory:" or name.startswith("file:") or Path(name).exists()


@receiver(post_migrate, dispatch_uid="uid_fields.shards_left_behind")
def note_shards_left_behind(
    sender: AppConfig,
    using: str = DEFAULT_DB_ALIAS,
    verbosity: int = 1,
    plan: Any = None,
    stdout: Any = None,
    **kwargs: Any,
) -> None:
    """After ``manage.py migrate`` on default: which shard databases lack what it has.

    Once per run (for this app's signal), only for ``migrate`` itself (``flush`` sends
    no plan), at verbosity 1 or more, and not within ``migrate-all``. A shard that cannot
    be read is left out: this is a note, and ``check --database default`` says more.
    """
    if (
        sender.name != "uid_fields.django"  # this app's own signal (its AppConfig.name)
        or using != DEFAULT_DB_ALIAS
        or plan is None
        or verbosity < 1
        or stdout is None
        or _in_migrate_all.get()
    ):
        return
    try:
        reference = applied_on_default()
    except DatabaseError:
        return
    behind = []
    for alias in migrated_databases()[1:]:
        try:
            missing = lag(alias, reference).behind_default if _readable(alias) else ()
        except DatabaseError:
            continue
        if missing:
            behind.append(f"{alias} ({len(missing)})")
    if behind:
        stdout.write(
            f"uid_fields: shard databases left behind, lacking migrations applied on "
            f"default: {', '.join(behind)}. Plain migrate migrates default only: run "
            "`manage.py uid_fields migrate-all`."
        )
