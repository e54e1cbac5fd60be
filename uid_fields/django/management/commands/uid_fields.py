"""``manage.py uid_fields``: decode, generate, shards, check-db, migrate-all, fixtures, audit,
move-shards, resolve-prepared.

Its output follows the standalone ``uid-fields``'s rule (``_internal.commandline``): a
reader that leaves early ends the command quietly with status 141, a write that fails
otherwise (a full disk) is a ``CommandError`` of one line and status 1, never a
traceback. Only writes to ``self.stdout`` count: a fixture file that cannot be read is
an error of its own.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TextIO, cast

from django.apps import apps
from django.core import serializers
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import connections

from ...._internal.commandline import BROKEN_PIPE_STATUS, STDIN, ids_of, output_failure
from ....sql import installs
from ...compat import wrapped_stream
from ...conf import conf, get_generator
from ...connections.replicas import replica_primaries
from ...connections.twophase import resolve_prepared
from ...fields import UidField
from ...operations import next_id_function
from ...ops.audit import audit_model, audited_models
from ...ops.fixtures import dump, load
from ...ops.migration_state import Lag, applied_on_default, lag, migrate_each, migrated_databases
from ...routing import sharded_pk
from ..arguments import add_arguments
from ..move_commands import MoveShardsCommands


def _progress(done: int, total: int, label: str, width: int = 30) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"


class OutputError(Exception):
    """A write to the command's standard output failed (``error``): told apart from the
    other OSErrors of a command, such as a fixture file that cannot be read."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Output(OutputWrapper):
    """``self.stdout`` whose failed writes are ``OutputError``."""

    def write(  # type: ignore[override]  # OutputWrapper's own signature, as django-stubs
        self,
        msg: str = "",
        style_func: Callable[[str], str] | None = None,
        ending: str | None = None,
    ) -> None:
        try:
            super().write(msg, style_func, ending)
        except OSError as exc:
            raise OutputError(exc) from exc

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise OutputError(exc) from exc


class Command(MoveShardsCommands, BaseCommand):
    help = "Decode and generate ids, show the shard map, verify and migrate shard databases."
    #: ``call_command(..., stdin=...)``: what ``decode -`` reads instead of sys.stdin.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # The stream Django wrapped (sys.stdout, or call_command's stdout=); the stubs
        # type OutputWrapper's attributes through its __getattr__.
        stream = cast(TextIO, wrapped_stream(self.stdout))
        self.stdout = _Output(stream, ending=self.stdout.ending)
        try:
            self._handle(**options)
            self.stdout.flush()
        except OutputError as exc:
            failure = output_failure(exc.error, stream)
            if failure.status == BROKEN_PIPE_STATUS:
                raise SystemExit(failure.status) from None  # quiet: the reader left
            raise CommandError(failure.message, returncode=failure.status) from None

    def _handle(self, **options: Any) -> None:
        for key in ("database", "source", "target"):
            given = options.get(key)
            for alias in given if isinstance(given, list) else [given]:
                if alias is not None and alias not in connections:
                    known = ", ".join(connections)
                    raise CommandError(
                        f"unknown database {alias!r}: not a database in DATABASES, "
                        f"which has {known}"
                    )
        self.verbosity = int(options.get("verbosity", 1))
        action = options["action"].replace("-", "_")
        getattr(self, f"do_{action}")(**options)

    # -- decode / generate ---------------------------------------------------------------
    def _generator(self, name: str) -> Any:
        try:
            return get_generator(name)
        except (LookupError, ValueError, TypeError) as exc:
            raise CommandError(str(exc)) from None

    def do_decode(
        self,
        ids: list[str],
        generator: str | None,
        json: bool = False,
        stdin: IO[str] | None = None,
        **options: Any,
    ) -> None:
        """One reading each with ``--generator``; otherwise every configured generator's,
        since the same number reads as different times under different layouts and
        epochs. ``-`` reads ids from standard input; a bad id is reported on standard
        error and the rest decoded, and the command fails at the end."""
        names = [generator] if generator is not None else sorted(conf.GENERATORS)
        generators = {name: self._generator(name) for name in names}
        failed = total = 0
        for total, id in enumerate(ids_of(ids, stdin or sys.stdin), start=1):
            try:
                self._decode_one(id, generators, generator is not None, json, first=total == 1)
            except CommandError as exc:
                if len(ids) == 1 and ids != [STDIN]:
                    raise
                self.stderr.write(str(exc))
                failed += 1
        if failed:
            raise CommandError(f"{failed} of {total} ids could not be decoded")

    def _decode_one(
        self, id: str, generators: dict[str, Any], one: bool, json: bool, first: bool
    ) -> None:
        readings: dict[str, dict[str, Any]] = {}
        failures: dict[str, str] = {}
        for name, gen in generators.items():
            try:
                readings[name] = gen.decompose(id).as_dict()
            except (TypeError, ValueError, OverflowError) as exc:
                failures[name] = str(exc)
        if not readings:
            detail = "; ".join(f"{n}: {e}" for n, e in failures.items()) or "no generators"
            raise CommandError(f"cannot decode {id!r}: {detail}")
        if json:
            self.stdout.write(_json(next(iter(readings.values())) if one else readings))
            return
        if not first:
            self.stdout.write("")
        for name, data in readings.items():
            if not one:
                self.stdout.write(f"generator {name!r}:")
            width = max(len(k) for k in data)
            indent = "" if one else "  "
            for key, value in data.items():
                self.stdout.write(f"{indent}{key:<{width}}  {value}")

    def do_generate(self, count: int, generator: str, shard: int | None, **options: Any) -> None:
        if not 0 <= count <= 100_000:
            raise CommandError(f"-n must be between 0 and 100000, got {count}")
        gen = self._generator(generator)
        try:
            if hasattr(gen, "shard_for_key"):
                values = gen.next_ids(count, shard=shard or 0)
            else:
                values = gen.next_ids(count)
        except (TypeError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        for value in values:
            self.stdout.write(str(value))

    # -- shards --------------------------------------------------------------------------
    def do_shards(self, **options: Any) -> None:
        for model in apps.get_models():
            field = sharded_pk(model)
            if field is None or field.shard_map is None:
                continue
            shard_map = field.shard_map
            self.stdout.write(
                f"{model._meta.label} (generator {field.generator_name!r}, "
                f"shards {field.shards_name!r}, route {shard_map.route!r})"
            )
            replicas = replica_primaries()
            for alias, (low, high) in shard_map.ranges.items():
                rows = model._default_manager.using(alias).count()
                copies = sorted(r for r, primary in replicas.items() if primary == alias)
                read = f"  replicas {', '.join(copies)}" if copies else ""
                closed = "  closed" if alias in shard_map.closed else ""
                self.stdout.write(
                    f"  {alias:<16} logical {low}..{high - 1:<8} rows {rows}{closed}{read}"
                )
            for alias in shard_map.incoming:
                rows = model._default_manager.using(alias).count()
                self.stdout.write(f"  {alias:<16} incoming (owns no logical shard)  rows {rows}")

    # -- check-db ------------------------------------------------------------------------
    def _database_defaults(self) -> list[UidField]:
        found = []
        for model in apps.get_models():
            pk = model._meta.pk
            if isinstance(pk, UidField) and pk.database_default and pk.shards_name:
                found.append(pk)
        return found

    def do_check_db(self, database: str | None = None, fix: bool = False, **options: Any) -> None:
        problems, checked = [], 0
        tables: dict[tuple[str, str, str], list[str]] = {}
        for field in self._database_defaults():
            key = (field.generator_name, str(field.shards_name), field.db_function)
            tables.setdefault(key, []).append(field.model._meta.db_table)
        for field in self._database_defaults():
            key = (field.generator_name, str(field.shards_name), field.db_function)
            if key not in tables:
                continue
            used_by = tables.pop(key)
            assert field.shard_map is not None
            for alias in field.shard_map.databases:
                if database and alias != database:
                    continue
                checked += 1
                # What --fix cannot mend (the C function's extension) is only reported.
                problem = self._server_problem(alias, *key)
                status = problem or self._check_alias(alias, *key)
                if (
                    status != "ok"
                    and fix
                    and not problem
                    and connections[alias].vendor == "postgresql"
                ):
                    self._install(alias, *key)
                    status = self._check_alias(alias, *key)
                    status = "fixed" if status == "ok" else status
                if status in ("ok", "fixed"):
                    status = self._check_state(alias, key, used_by, fix) or status
                self.stdout.write(f"{alias:<16} {field.db_function}() {status}")
                if status not in ("ok", "fixed", "state reset to now"):
                    problems.append(f"{alias}: {status}")
        if not checked:
            self.stdout.write("no database-generated ids are configured")
        if problems:
            raise CommandError("; ".join(problems))

    def _check_state(
        self, alias: str, key: tuple[str, str, str], tables: list[str], fix: bool
    ) -> str | None:
        """None when the function's state is on time; else what is wrong (or was reset)."""
        function = next_id_function(key[0], key[1], alias, key[2])
        with connections[alias].cursor() as cursor:
            state = function.check_state(cursor, tables)
            if state.ahead_ms <= STATE_TOLERANCE_MS:
                return None
            ahead = f"state {state.ahead_ms / 1000:g} s ahead of the clock"
            if not fix:
                return (
                    f"{ahead}; run check-db --fix"
                    if state.resettable
                    else (f"{ahead}, and stored ids too: wait for real time to pass them")
                )
            try:
                function.reset_state(cursor, tables)
            except ValueError as exc:
                return f"{ahead}; not reset: {exc}"
        return "state reset to now"

    def _server_problem(self, alias: str, generator: str, shards: str, function: str) -> str:
        """The database's problem with the function's language (the C one needs the
        ``uid_fields`` extension, of this package's version, preloaded), or ''."""
        if connections[alias].vendor != "postgresql":
            return ""
        expected = next_id_function(generator, shards, alias, function)
        with connections[alias].cursor() as cursor:
            return expected.server_problem(cursor) or ""

    def _install(self, alias: str, generator: str, shards: str, function: str) -> None:
        made = next_id_function(generator, shards, alias, function)
        with connections[alias].cursor() as cursor:
            existed = installs.was_installed(cursor, made)
            for statement in made.create_statements():
                cursor.execute(statement)
        installs.installed(made, f"database {alias!r}", existed=existed)

    def _check_alias(self, alias: str, generator: str, shards: str, function: str) -> str:
        connection = connections[alias]
        if connection.vendor != "postgresql":
            return f"not PostgreSQL ({connection.vendor})"
        expected = next_id_function(generator, shards, alias, function)
        with connection.cursor() as cursor:
            for sequence in expected.sequences:
                cursor.execute("SELECT to_regclass(%s)", [sequence])
                if cursor.fetchone()[0] is None:
                    return f"missing sequence {sequence}"
            bodies, schemas = {}, {}
            for signature in (*expected.installed_bodies(), f"{expected.clock}()"):
                cursor.execute(
                    "SELECT p.prosrc, quote_ident(n.nspname) FROM pg_proc p "
                    "JOIN pg_namespace n ON n.oid = p.pronamespace "
                    "WHERE p.oid = to_regprocedure(%s)",
                    [signature],
                )
                row = cursor.fetchone()
                if row is None:
                    return f"missing function {signature}; run check-db --fix"
                bodies[signature], schemas[signature] = row
        wanted = expected.installed_bodies(schemas[f"{function}(integer)"])
        stale = [name for name, body in wanted.items() if _squash(bodies[name]) != _squash(body)]
        if stale == [f"{function}()"]:
            return f"{function}() does not use logical shard {expected.shard}"
        if stale:
            return "stale function body (epoch, layout or shard changed?); run check-db --fix"
        return "ok"

    # -- fixtures ------------------------------------------------------------------------
    def do_dumpdata(
        self,
        labels: list[str],
        format: str,
        indent: int | None,
        database: str,
        output: str | None = None,
        **options: Any,
    ) -> None:
        try:
            text = dump(labels, fmt=format, indent=indent, database=database)
        except (LookupError, serializers.SerializerDoesNotExist) as exc:
            raise CommandError(str(exc)) from None
        if output:
            Path(output).write_text(text)
        else:
            self.stdout.write(text)

    def do_loaddata(self, fixtures: list[str], database: str, **options: Any) -> None:
        missing = [f for f in fixtures if not Path(f).is_file()]
        if missing:
            raise CommandError(f"no such fixture file: {', '.join(missing)}")
        counts = load(fixtures, database=database)
        for alias in sorted(counts):
            self.stdout.write(f"{alias:<16} {counts[alias]} rows")
        self.stdout.write(f"installed {sum(counts.values())} rows from {len(fixtures)} file(s)")

    # -- audit ---------------------------------------------------------------------------
    def do_audit(self, labels: list[str], samples: int, **options: Any) -> None:
        total = 0
        try:
            chosen = audited_models(labels)
        except LookupError as error:
            raise CommandError(f"audit: {error.args[0]}") from None
        for result in (r for model in chosen for r in audit_model(model, samples=samples)):
            total += result.misplaced
            if result.misplaced or self.verbosity >= 1:  # -v 0: only what needs fixing
                self.stdout.write(str(result))
        if self.verbosity >= 1:
            self.stdout.write(f"{total} misplaced rows" if total else "every row is on its shard")
        if total:
            raise CommandError(f"{total} rows are stored off their shard")

    # -- resolve-prepared ----------------------------------------------------------------
    def do_resolve_prepared(
        self, database: list[str] | None, older_than: float, **options: Any
    ) -> None:
        result = resolve_prepared(database, older_than_s=older_than)
        for line in result.lines():
            self.stdout.write(line)
        self.stdout.write(result.summary())

    # -- migrate-all ---------------------------------------------------------------------
    def do_migrate_all(
        self,
        app_label: str | None = None,
        migration_name: str | None = None,
        check: bool = False,
        plan: bool = False,
        fake: bool = False,
        fake_initial: bool = False,
        **options: Any,
    ) -> None:
        """``migrate`` on default, then on every shard database, and what happened on each.

        ``migrate``'s own arguments (app label, migration name, ``--plan``, ``--fake``,
        ``--fake-initial``) go to each run. A failed shard does not stop the others (each
        ends where its summary line says); the command exits non-zero when any database
        failed, and prints the summary of every database then, even at ``-v 0``.
        """
        if app_label is not None:
            try:
                apps.get_app_config(app_label)
            except LookupError:
                raise CommandError(f"no installed app with label {app_label!r}") from None
        elif migration_name is not None:  # pragma: no cover - argparse fills app_label first
            raise CommandError("a migration name needs an app label")
        aliases = migrated_databases()
        if check:
            self._check_migrations(aliases, app_label)
            return
        verbose = self.verbosity >= 1

        def started(done: int, alias: str) -> None:
            if plan:
                self.stdout.write(f"{alias}:")
            elif verbose:
                self.stdout.write(_progress(done, len(aliases), f"migrating {alias}"))

        results = migrate_each(
            aliases,
            on_start=started,
            app_label=app_label,
            migration_name=migration_name,
            plan=plan,
            fake=fake,
            fake_initial=fake_initial,
            verbosity=max(self.verbosity - 1, 0),
            stdout=self.stdout,
            stderr=self.stderr,
        )
        failed = [result.alias for result in results if not result.ok]
        if verbose and not plan:
            last = "all databases migrated" if not failed else f"{len(failed)} not migrated"
            self.stdout.write(_progress(len(aliases), len(aliases), last))
        if failed or (verbose and not plan):
            for result in results:
                self.stdout.write(f"{result.alias:<16} {result}")
        if verbose and conf.STRICT_ROUTING is False:
            self.stdout.write("note: STRICT_ROUTING is off; unrouted queries read 'default'")
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(aliases)} databases were not fully migrated: "
                f"{', '.join(failed)} (each line above says where it stopped)"
            )

    def _check_migrations(self, aliases: list[str], app_label: str | None) -> None:
        """``--check``: what each database lacks, relative to default and to the disk (of
        one app with an app label); at ``-v 0`` only the databases that lack something."""
        reference = applied_on_default()
        lagging = []
        for alias in aliases:
            found = lag(alias, reference)
            if app_label is not None:
                found = Lag(
                    alias,
                    tuple(key for key in found.behind_default if key[0] == app_label),
                    tuple(key for key in found.unapplied if key[0] == app_label),
                )
            if not found.up_to_date:
                lagging.append(alias)
            if self.verbosity >= 1 or not found.up_to_date:
                self.stdout.write(f"{alias:<16} {found}")
        if lagging:
            raise CommandError(
                f"not migrated: {', '.join(lagging)}; run `manage.py uid_fields migrate-all`"
            )


#: A state ahead of the clock by less than this is a burst carried into the next
#: milliseconds, not a clock fault.
STATE_TOLERANCE_MS = 1000


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _json(data: Any) -> str:
    return json.dumps(data, default=str)
