"""``uid-fields`` / ``python -m uid_fields``: decode, generate and inspect ids, and build
the PostgreSQL extension of the C ``next_id`` from the installed package
(``pg-extension --install``).

When the reader of the output leaves early (``uid-fields generate -n 100000 | head -1``),
the command ends quietly with status 141 (128 + SIGPIPE); a write that fails otherwise
(``> /dev/full``) is one line on standard error and status 1. The rule is
``uid_fields._internal.commandline``'s, which ``manage.py uid_fields`` follows too.

``decode`` takes several ids, and ``-`` reads more from standard input (whitespace
separated, decoded as they arrive): a bad one is reported and the rest decoded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from . import __version__
from ._internal.commandline import STDIN, ids_of, output_failure
from ._internal.timeutil import parse_instant
from .ids import locality, uniqid
from .ids.generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from .ids.layouts import PRESETS, DecimalLayout, IntLayout, SnowflakeLayout
from .sql import pg_extension

SCHEMES = [*PRESETS, "locality", "uniqid"]
DEFAULT_LAYOUT = "twitter"


class CliError(Exception):
    pass


def _layout(args: argparse.Namespace) -> IntLayout:
    layout = PRESETS[args.layout]
    if args.epoch is not None:
        layout = layout.replace(epoch_ms=parse_instant(args.epoch))
    return layout


def _node_fields(pairs: Sequence[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise CliError(f"--field expects NAME=INT, got {pair!r}")
        fields[name.strip()] = int(value)
    return fields


def _decoder(args: argparse.Namespace) -> Callable[[str], dict[str, Any]]:
    """What reads one id under the chosen layout; built once, so a bad ``--epoch`` is
    one error, not one per id."""
    if args.layout == "locality":
        return lambda text: locality.decompose(text).as_dict()
    if args.layout == "uniqid":
        return lambda text: uniqid.decompose(text, args.shards).as_dict()
    layout = _layout(args)
    return lambda text: layout.decompose(text).as_dict()


def _decode_each(args: argparse.Namespace) -> int:
    """Print the parts of each id as it is read: a mapping each (a blank line between),
    or with ``--json`` one object per line. A bad id is one line on standard error and
    status 2 at the end; the others are still decoded."""
    decode = _decoder(args)
    status = 0
    for number, text in enumerate(ids_of(args.ids, sys.stdin)):
        try:
            data = decode(text)
        except (ValueError, TypeError, OverflowError) as exc:
            detail = exc if len(args.ids) == 1 and args.ids != [STDIN] else f"{text!r}: {exc}"
            print(f"uid-fields: error: {detail}", file=sys.stderr)
            status = 2
            continue
        if args.json:
            print(json.dumps(data, default=str))
        else:
            if number:
                print()
            _print_mapping(data)
    return status


def _generate(args: argparse.Namespace) -> list[Any]:
    if args.count < 0 or args.count > 1_000_000:
        raise CliError(f"-n must be between 0 and 1000000, got {args.count}")
    if args.layout == "locality":
        return [
            str(u) for u in locality.LocalityUUIDGenerator(args.sequential).next_ids(args.count)
        ]
    if args.layout == "uniqid":
        return uniqid.UniqIdGenerator(args.shards).next_ids(args.count)
    layout = _layout(args)
    fields = _node_fields(args.field)
    if isinstance(layout, DecimalLayout):
        return DecimalGenerator(layout, server=fields.pop("server", 0)).next_ids(args.count)
    assert isinstance(layout, SnowflakeLayout)
    if "shard" in layout.field_names and "shard" not in fields:
        sharded = ShardedIdGenerator(layout, **fields)
        return sharded.next_ids(args.count, shard=args.shard)
    return SnowflakeGenerator(layout, **fields).next_ids(args.count)


def _inspect(args: argparse.Namespace) -> dict[str, Any]:
    if args.layout in ("locality", "uniqid"):
        raise CliError(f"inspect takes an integer layout, not {args.layout!r}")
    layout = _layout(args)
    info: dict[str, Any] = {
        "layout": args.layout,
        "diagram": layout.diagram(),
        "epoch": layout.epoch.isoformat().replace("+00:00", "Z"),
        "exhausted_at": layout.exhausted_at.isoformat().replace("+00:00", "Z"),
        "years_left": round((layout.exhausted_at - datetime.now(UTC)).days / 365.25, 1),
    }
    if isinstance(layout, SnowflakeLayout):
        nodes = 1
        for name in layout.field_names:
            info[f"{name}_values"] = 1 << layout.field_bits(name)
            nodes <<= layout.field_bits(name)
        info["ids_per_ms_per_node"] = layout.ids_per_ms
        info["nodes"] = nodes
    else:
        assert isinstance(layout, DecimalLayout)
        info["ids_per_ms_per_server"] = (layout.max_random + 1) / layout.time_unit_ms
        info["servers"] = layout.server_scale
    return info


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uid-fields", description="decode, generate and inspect distributed ids"
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--layout",
            choices=SCHEMES,
            default=DEFAULT_LAYOUT,
            help=f"id scheme (default: {DEFAULT_LAYOUT})",
        )
        p.add_argument("--epoch", help="custom epoch: ISO 8601 or Unix ms")
        p.add_argument("--shards", type=int, default=4, help="uniqid: total shards (1..10)")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    decode = sub.add_parser("decode", help="print the parts of ids")
    decode.add_argument(
        "ids",
        nargs="+",
        metavar="ID",
        help="an id: an integer, or a UUID for --layout locality; '-' reads ids from "
        "standard input, separated by whitespace",
    )
    common(decode)
    generate = sub.add_parser("generate", help="print new ids")
    generate.add_argument("-n", "--count", type=int, default=1, help="how many (default 1)")
    generate.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="NAME=INT",
        help="a node field of the layout, e.g. worker=3 (repeatable)",
    )
    generate.add_argument("--shard", type=int, default=0, help="sharded layouts: logical shard")
    generate.add_argument("--sequential", action="store_true", help="locality: sequential mode")
    common(generate)
    inspect = sub.add_parser("inspect", help="capacity and lifetime of a layout")
    common(inspect)
    extension = sub.add_parser(
        "pg-extension",
        help="build and install the uid_fields PostgreSQL extension (the C next_id)",
        description="Build the uid_fields extension from the source this package ships, "
        "with PGXS against pg_config's server (needs its headers, make and a C compiler), "
        "and install it there (usually as root). Then: shared_preload_libraries = "
        "'uid_fields', a restart, and CREATE EXTENSION uid_fields; in each database.",
    )
    action = extension.add_mutually_exclusive_group(required=True)
    action.add_argument("--install", action="store_true", help="build and install it")
    action.add_argument(
        "--print-dir", action="store_true", help="print the directory of its source"
    )
    extension.add_argument("--pg-config", help="the server's pg_config (default: on PATH)")
    return parser


def _pg_extension(args: argparse.Namespace) -> int:
    if args.print_dir:
        print(pg_extension.source_dir())
        return 0
    try:
        installed = pg_extension.build_and_install(args.pg_config)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"uid-fields: error: {exc}", file=sys.stderr)
        return 1
    print(f"installed the {pg_extension.EXTENSION} extension {pg_extension.EXTENSION_VERSION}:")
    for path in installed:
        print(f"  {path}")
    print(
        "next: shared_preload_libraries = 'uid_fields' in postgresql.conf, restart the "
        "server, then as a superuser in each database: CREATE EXTENSION uid_fields; and "
        "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO <the application's role>;"
    )
    return 0


def _print_mapping(data: dict[str, Any]) -> None:
    width = max(len(k) for k in data)
    for key, value in data.items():
        print(f"{key:<{width}}  {value}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "pg-extension":
        return _pg_extension(args)
    try:
        status = _run(args)
        sys.stdout.flush()
    except OSError as exc:  # _run reads nothing but stdin, so this is a failed write
        failure = output_failure(exc, sys.stdout)
        if failure.message is not None:
            print(f"uid-fields: error: {failure.message}", file=sys.stderr)
        return failure.status
    return status


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "decode":
            return _decode_each(args)
        if args.command == "generate":
            result: Any = _generate(args)
        else:
            result = _inspect(args)
    except (CliError, ValueError, TypeError, OverflowError) as exc:
        print(f"uid-fields: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, default=str))
    elif isinstance(result, list):
        for item in result:
            print(item)
    else:
        _print_mapping(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
