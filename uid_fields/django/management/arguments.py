"""The options of ``manage.py uid_fields``: one subcommand each, help on every option.

Django gives a command's own parser ``-v/--verbosity``, but a subcommand's parser knows
nothing of it, so ``uid_fields migrate-all -v 0`` was "unrecognized arguments": every
subcommand here accepts it too (it overrides the one given before the subcommand).
``migrate-all`` takes ``migrate``'s own arguments and passes them to each database.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandParser

__all__ = ["add_arguments"]


def _subcommand(sub: Any, name: str, help: str) -> CommandParser:
    parser: CommandParser = sub.add_parser(name, help=help, description=help)
    parser.add_argument(
        "-v",
        "--verbosity",
        type=int,
        choices=[0, 1, 2, 3],
        default=argparse.SUPPRESS,
        help="0: errors and summaries of failures only, 1: normal, 2-3: more of migrate's output",
    )
    return parser


def add_arguments(parser: CommandParser) -> None:
    """Every subcommand of ``manage.py uid_fields`` and its options."""
    sub = parser.add_subparsers(dest="action", required=True)
    decode = _subcommand(sub, "decode", "print the parts of ids")
    decode.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="an id, as an integer, a decimal or a UUID; '-' reads ids from standard "
        "input, separated by whitespace",
    )
    decode.add_argument(
        "--generator",
        help="the generator of UID_FIELDS['GENERATORS'] to read them with, its layout and "
        "epoch (default: every configured generator, one reading each)",
    )
    decode.add_argument("--json", action="store_true", help="machine-readable output")
    generate = _subcommand(sub, "generate", "print new ids")
    generate.add_argument("-n", "--count", type=int, default=1, help="how many (default 1)")
    generate.add_argument(
        "--generator", default="default", help="a name of UID_FIELDS['GENERATORS']"
    )
    generate.add_argument("--shard", type=int, help="logical shard (sharded generators)")
    _subcommand(sub, "shards", "logical shard ranges per database, rows per shard")
    check = _subcommand(sub, "check-db", "verify the PostgreSQL next_id functions")
    check.add_argument("--database", help="only this alias")
    check.add_argument(
        "--fix",
        action="store_true",
        help="re-install a missing or stale function (its state sequence is kept)",
    )
    _migrate_all(sub)
    dump = _subcommand(sub, "dumpdata", "dump models, the rows of sharded ones from every shard")
    dump.add_argument("labels", nargs="*", help="app_label or app_label.Model")
    dump.add_argument("--format", default="json", help="a Django serializer (default json)")
    dump.add_argument("--indent", type=int, help="indent the output by this many spaces")
    dump.add_argument("--database", default="default", help="for ordinary models")
    dump.add_argument("-o", "--output", help="a file instead of standard output")
    load = _subcommand(sub, "loaddata", "load fixture files, each sharded row onto its own shard")
    load.add_argument("fixtures", nargs="+", help="fixture files (.json, .xml)")
    load.add_argument("--database", default="default", help="for ordinary models")
    audit = _subcommand(
        sub, "audit", "rows of sharded models stored on a database their id does not name"
    )
    audit.add_argument("labels", nargs="*", help="app_label or app_label.Model")
    audit.add_argument(
        "--samples", type=int, default=5, help="misplaced ids shown per model (default 5)"
    )
    _move_shards(sub)
    resolve = _subcommand(
        sub,
        "resolve-prepared",
        "finish two-phase transactions a killed process left prepared (PostgreSQL)",
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


def _migrate_all(sub: Any) -> None:
    migrate_all = _subcommand(
        sub, "migrate-all", "migrate default and every shard database; a summary of each"
    )
    migrate_all.add_argument(
        "app_label", nargs="?", help="only this app's migrations, as with migrate"
    )
    migrate_all.add_argument(
        "migration_name",
        nargs="?",
        help="bring the app to this migration (forwards or backwards), as with migrate",
    )
    migrate_all.add_argument(
        "--check",
        action="store_true",
        help="migrate nothing: list what each database lacks, exit non-zero if any does",
    )
    migrate_all.add_argument(
        "--plan", action="store_true", help="show each database's plan; migrate nothing"
    )
    migrate_all.add_argument(
        "--fake",
        action="store_true",
        help="mark the migrations applied (or unapplied) on each database without running them",
    )
    migrate_all.add_argument(
        "--fake-initial",
        action="store_true",
        help="as with migrate: fake initial migrations whose tables exist already",
    )


def _move_shards(sub: Any) -> None:
    move = _subcommand(
        sub, "move-shards", "copy logical shards to another database, verify, and later --cleanup"
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
    move.add_argument(
        "--batch-size", type=int, default=1000, help="rows per read and write (default 1000)"
    )
    move.add_argument(
        "--state", help="the file that lets a stopped copy resume (default: in this directory)"
    )
    move.add_argument(
        "--copy-back",
        action="store_true",
        help="with --abort, after a new map was deployed early and rolled back: copy the "
        "rows and versions only the target holds to the source first, then abort",
    )
    steps = move.add_mutually_exclusive_group()
    steps.add_argument(
        "--switch",
        action="store_true",
        help="close the range for writes on the source (the fence), catch up and verify: "
        "then deploy the new map",
    )
    steps.add_argument(
        "--unfence",
        action="store_true",
        help="call a switch off: remove the fence, the source takes the range's writes again",
    )
    steps.add_argument(
        "--abort",
        action="store_true",
        help="call a move off before its switch: delete the target's copies of the range "
        "and the fence (by logical replication also the subscription, slot and "
        "publication); refused when the target holds writes the source lacks",
    )
    steps.add_argument(
        "--cleanup",
        action="store_true",
        help="after the new map is deployed: delete from the source what it no longer owns, "
        "then remove the fence",
    )
    move.add_argument(
        "--method",
        choices=("auto", "logical", "portable"),
        default="auto",
        help="logical: PostgreSQL logical replication (a publication filtered to the range, "
        "a subscription on the target; needs wal_level=logical on the source and a "
        "superuser on the target); portable: batch copies by primary key; auto (default): "
        "logical when both databases are PostgreSQL and the ids' route is arithmetic",
    )
    move.add_argument(
        "--dry-run",
        action="store_true",
        help="with --cleanup: report what would be deleted and kept, delete nothing",
    )
