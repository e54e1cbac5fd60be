"""``manage.py uid_fields``: decode, generate, shards, check-db, migrate-all, fixtures, audit,
move-shards, resolve-prepared."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core import serializers
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from ....sql import installs
from ...audit import audit
from ...conf import conf, get_generator
from ...fields import UidField
from ...fixtures import dump, load
from ...migration_state import applied_on_default, lag, migrate_each, migrated_databases
from ...moves import shard_move
from ...operations import next_id_function
from ...replicas import replica_primaries
from ...routing import sharded_pk
from ...twophase import resolve_prepared


def _progress(done: int, total: int, label: str, width: int = 30) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"


class Command(BaseCommand):
    help = "Decode and generate ids, show the shard map, verify and migrate shard databases."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        decode = sub.add_parser("decode", help="print the parts of an id")
        decode.add_argument("id")
        decode.add_argument(
            "--generator", help="the generator to read it with (default: every configured one)"
        )
        decode.add_argument("--json", action="store_true")
        generate = sub.add_parser("generate", help="print new ids")
        generate.add_argument("-n", "--count", type=int, default=1)
        generate.add_argument("--generator", default="default")
        generate.add_argument("--shard", type=int, help="logical shard (sharded generators)")
        sub.add_parser("shards", help="logical shard ranges per database, rows per shard")
        check = sub.add_parser("check-db", help="verify the PostgreSQL next_id functions")
        check.add_argument("--database", help="only this alias")
        check.add_argument(
            "--fix",
            action="store_true",
            help="re-install a missing or stale function (its state sequence is kept)",
        )
        migrate_all = sub.add_parser(
            "migrate-all",
            help="migrate default and every shard database; a summary of each at the end",
        )
        migrate_all.add_argument(
            "--check",
            action="store_true",
            help="migrate nothing: list what each database lacks, exit non-zero if any does",
        )
        dump = sub.add_parser(
            "dumpdata", help="dump models, the rows of sharded ones from every shard"
        )
        dump.add_argument("labels", nargs="*", help="app_label or app_label.Model")
        dump.add_argument("--format", default="json")
        dump.add_argument("--indent", type=int)
        dump.add_argument("--database", default="default", help="for ordinary models")
        dump.add_argument("-o", "--output", help="a file instead of standard output")
        load = sub.add_parser(
            "loaddata", help="load fixture files, each sharded row onto its own shard"
        )
        load.add_argument("fixtures", nargs="+", help="fixture files (.json, .xml)")
        load.add_argument("--database", default="default", help="for ordinary models")
        audit_parser = sub.add_parser(
            "audit", help="rows of sharded models stored on a database their id does not name"
        )
        audit_parser.add_argument("labels", nargs="*", help="app_label or app_label.Model")
        audit_parser.add_argument("--samples", type=int, default=5)
        move = sub.add_parser(
            "move-shards",
            help="copy logical shards to another database, verify, and later --cleanup",
        )
        move.add_argument("--map", required=True, help="the shard map (a SHARDS name)")
        move.add_argument("--from", dest="source", required=True, help="the database they leave")
        move.add_argument("--to", dest="target", required=True, help="the database they go to")
        move.add_argument(
            "--range",
            dest="span",
            help="logical shards start:stop (half-open; default: all of the source's)",
        )
        move.add_argument(
            "--logical-shards",
            type=int,
            help="what the range counts in (default: the most logical shards of the map's ids)",
        )
        move.add_argument("--batch-size", type=int, default=1000)
        move.add_argument(
            "--state", help="the file that lets a stopped copy resume (default: in this directory)"
        )
        move.add_argument(
            "--cleanup",
            action="store_true",
            help="after the new map is deployed: delete from the source what it no longer owns",
        )
        resolve = sub.add_parser(
            "resolve-prepared",
            help="finish two-phase transactions a killed process left prepared (PostgreSQL)",
        )
        resolve.add_argument(
            "--database",
            action="append",
            help="a database to look in (repeatable; default: every PostgreSQL database)",
        )
        resolve.add_argument(
            "--older-than",
            type=float,
            default=60.0,
            help="roll back undecided transactions prepared at least this many seconds ago",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"].replace("-", "_")
        getattr(self, f"do_{action}")(**options)

    # -- decode / generate ---------------------------------------------------------------
    def _generator(self, name: str) -> Any:
        try:
            return get_generator(name)
        except (LookupError, ValueError, TypeError) as exc:
            raise CommandError(str(exc)) from None

    def do_decode(self, id: str, generator: str | None, json: bool = False, **options: Any) -> None:
        """One reading with ``--generator``; otherwise every configured generator's, since
        the same number reads as different times under different layouts and epochs."""
        names = [generator] if generator is not None else sorted(conf.GENERATORS)
        readings: dict[str, dict[str, Any]] = {}
        failures: dict[str, str] = {}
        for name in names:
            try:
                readings[name] = self._generator(name).decompose(id).as_dict()
            except (TypeError, ValueError, OverflowError) as exc:
                failures[name] = str(exc)
        if not readings:
            detail = "; ".join(f"{n}: {e}" for n, e in failures.items()) or "no generators"
            raise CommandError(f"cannot decode {id!r}: {detail}")
        if json:
            self.stdout.write(_json(readings[names[0]] if generator else readings))
            return
        for name, data in readings.items():
            if generator is None:
                self.stdout.write(f"generator {name!r}:")
            width = max(len(k) for k in data)
            indent = "  " if generator is None else ""
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
                status = self._check_alias(alias, *key)
                if status != "ok" and fix and connections[alias].vendor == "postgresql":
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
            cursor.execute("SELECT to_regclass(%s)", [expected.sequence])
            if cursor.fetchone()[0] is None:
                return f"missing sequence {expected.sequence}"
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
        for result in audit(labels, samples=samples):
            total += result.misplaced
            self.stdout.write(str(result))
        self.stdout.write(f"{total} misplaced rows" if total else "every row is on its shard")
        if total:
            raise CommandError(f"{total} rows are stored off their shard")

    # -- move-shards ---------------------------------------------------------------------
    def do_move_shards(
        self,
        map: str,
        source: str,
        target: str,
        span: str | None,
        logical_shards: int | None,
        batch_size: int,
        state: str | None,
        cleanup: bool,
        **options: Any,
    ) -> None:
        low = high = None
        if span is not None:
            try:
                low, high = (int(part) for part in span.split(":"))
            except ValueError:
                raise CommandError(f"--range must be start:stop, got {span!r}") from None
        state = state or f".uid_fields-move-{map}-{source}-{target}-{span or 'all'}.json".replace(
            ":", "-"
        )
        try:
            move = shard_move(
                map,
                source=source,
                target=target,
                low=low,
                high=high,
                space=logical_shards,
                batch=batch_size,
                state=None if cleanup else state,
                on_progress=lambda p: self.stdout.write(str(p)),
            )
        except (ValueError, TypeError, LookupError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{move}: {', '.join(t.store.label for t in move.tables)}")
        if cleanup:
            try:
                cleaned = move.cleanup()
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            for report in cleaned:
                self.stdout.write(str(report))
            kept = sum(r.kept for r in cleaned)
            if kept:
                raise CommandError(f"{kept} rows were kept on {source}: they are not on {target}")
            return
        for copied in move.copy():
            self.stdout.write(str(copied))
        checked = move.verify()
        for check in checked:
            self.stdout.write(str(check))
        if not all(c.ok for c in checked):
            if move.deployed:
                raise CommandError(f"rows of {source} are missing on {target}: run again")
            self.stdout.write(
                "the copy still differs where writes went on meanwhile; the run after the "
                "new map is deployed catches up"
            )
        step = (
            f"deployed: run move-shards --cleanup to delete the copies left on {source}"
            if move.deployed
            else f"next: give these logical shards to {target} in the map and deploy, "
            "run move-shards again to catch up, then --cleanup"
        )
        self.stdout.write(step)

    # -- resolve-prepared ----------------------------------------------------------------
    def do_resolve_prepared(
        self, database: list[str] | None, older_than: float, **options: Any
    ) -> None:
        result = resolve_prepared(database, older_than_s=older_than)
        for line in result.lines():
            self.stdout.write(line)
        self.stdout.write(result.summary())

    # -- migrate-all ---------------------------------------------------------------------
    def do_migrate_all(self, check: bool = False, **options: Any) -> None:
        """``migrate`` on default, then on every shard database, and what happened on each.

        A failed shard does not stop the others (each ends where its summary line says);
        the command exits non-zero when any database failed.
        """
        aliases = migrated_databases()
        if check:
            self._check_migrations(aliases)
            return
        verbosity = int(options.get("verbosity", 1))

        def started(done: int, alias: str) -> None:
            self.stdout.write(_progress(done, len(aliases), f"migrating {alias}"))

        results = migrate_each(
            aliases,
            on_start=started,
            verbosity=max(verbosity - 1, 0),
            stdout=self.stdout,
            stderr=self.stderr,
        )
        failed = [result.alias for result in results if not result.ok]
        last = "all databases migrated" if not failed else f"{len(failed)} not migrated"
        self.stdout.write(_progress(len(aliases), len(aliases), last))
        for result in results:
            self.stdout.write(f"{result.alias:<16} {result}")
        if conf.STRICT_ROUTING is False:
            self.stdout.write("note: STRICT_ROUTING is off; unrouted queries read 'default'")
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(aliases)} databases were not fully migrated: "
                f"{', '.join(failed)} (each line above says where it stopped)"
            )

    def _check_migrations(self, aliases: list[str]) -> None:
        """``--check``: what each database lacks, relative to default and to the disk."""
        reference = applied_on_default()
        lagging = []
        for alias in aliases:
            found = lag(alias, reference)
            self.stdout.write(f"{alias:<16} {found}")
            if not found.up_to_date:
                lagging.append(alias)
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
