"""SQL text for moving logical shards with PostgreSQL logical replication.

``uid_fields.ops.replication`` runs these statements; here they are only built, so the
names, the quoting and the catalog queries can be read (and tested) in one place.

Every object a move creates (publication on the source, replication slot on the source,
subscription on the target) carries one name, ``move_name(...)``: ``uidf_mv_`` and a
readable part of the move (map, databases, range), cut so the whole is a valid
identifier of at most 63 bytes, and a hash of the full description that keeps two moves
apart even when the readable parts were cut alike. Replication slot names allow only
lower-case letters, digits and the underscore, so the name uses nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

__all__ = [
    "MAX_IDENTIFIER",
    "checksum_sql",
    "conninfo",
    "create_publication_sql",
    "create_subscription_sql",
    "move_name",
    "quote_ident",
    "quote_literal",
]

#: PostgreSQL's NAMEDATALEN - 1: longer names are cut by the server, silently.
MAX_IDENTIFIER = 63
PREFIX = "uidf_mv_"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """A string constant (``standard_conforming_strings`` is on since PostgreSQL 9.1)."""
    return "'" + value.replace("'", "''") + "'"


def move_name(*parts: object) -> str:
    """The name of every object of one move: valid as an identifier and as a slot name."""
    full = "/".join(str(p) for p in parts)
    digest = hashlib.blake2b(full.encode(), digest_size=5).hexdigest()
    readable = re.sub(r"[^a-z0-9]+", "_", full.lower()).strip("_")
    room = MAX_IDENTIFIER - len(PREFIX) - len(digest) - 1
    return f"{PREFIX}{readable[:room].rstrip('_')}_{digest}"


def _conninfo_value(value: str) -> str:
    """A libpq keyword value: quoted, with backslashes and quotes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def conninfo(
    *,
    host: str | None = None,
    port: int | str | None = None,
    dbname: str | None = None,
    user: str | None = None,
    password: str | None = None,
    **extra: str | int | None,
) -> str:
    """A libpq connection string (``CREATE SUBSCRIPTION ... CONNECTION``) from the parts
    Django's ``DATABASES`` entries and SQLAlchemy's URLs give; empty parts left out.
    It is what the *target's* server uses to reach the source: a host that means
    something else there (a socket directory, ``localhost`` in another container) must
    be given as the target's server sees it."""
    given = {"host": host, "port": port, "dbname": dbname, "user": user, "password": password}
    given.update(extra)
    return " ".join(
        f"{key}={_conninfo_value(str(value))}"
        for key, value in given.items()
        if value is not None and value != ""
    )


def create_publication_sql(name: str, filtered: Sequence[tuple[str, str]]) -> str:
    """A publication of ``(table, row filter)`` pairs. Truncates are not published: a
    TRUNCATE ignores row filters and would empty the target's whole table."""
    tables = ", ".join(f"TABLE {table} WHERE ({where})" for table, where in filtered)
    return (
        f"CREATE PUBLICATION {quote_ident(name)} FOR {tables} "
        "WITH (publish = 'insert, update, delete')"
    )


def create_subscription_sql(name: str, source_conninfo: str) -> str:
    """A subscription to the publication of the same name, over the slot of the same
    name, made beforehand on the source (``create_slot = false``: a subscription that
    makes its slot hangs when source and target share a cluster). ``copy_data`` copies
    the rows already there; streaming then applies every later change in commit order."""
    return (
        f"CREATE SUBSCRIPTION {quote_ident(name)} CONNECTION {quote_literal(source_conninfo)} "
        f"PUBLICATION {quote_ident(name)} WITH (copy_data = true, create_slot = false, "
        f"slot_name = {quote_literal(name)}, enabled = true)"
    )


def checksum_sql(table: str, logical: str, where: str, key: str, columns: Iterable[str]) -> str:
    """Per logical shard of the range: the row count and a digest of the rows' contents
    (each row's text in key order), equal on two databases iff they hold the same rows.
    The sessions must format values alike (``SESSION_SETTINGS``)."""
    row = ", ".join(columns)
    return (
        f"SELECT {logical} AS logical, count(*), "
        f"md5(string_agg(md5(ROW({row})::text), '' ORDER BY {key})) "
        f"FROM {table} WHERE {where} GROUP BY 1"
    )


#: Run on both sides before comparing row texts: a timestamptz, a float or a date prints
#: the same only under the same settings.
SESSION_SETTINGS = (
    "SET TimeZone = 'UTC'",
    "SET DateStyle = 'ISO, YMD'",
    "SET extra_float_digits = 3",
    "SET IntervalStyle = 'postgres'",
)

#: (relreplident, name of the identity index) of a table (``%s``: its quoted name).
IDENTITY_SQL = (
    "SELECT c.relreplident, (SELECT i.indexrelid::regclass::text FROM pg_index i "
    "WHERE i.indrelid = c.oid AND i.indisreplident) FROM pg_class c WHERE c.oid = {table}::regclass"
)

#: Column names of a table's replica identity (empty for FULL or NOTHING).
IDENTITY_COLUMNS_SQL = (
    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = {table}::regclass AND "
    "CASE (SELECT relreplident FROM pg_class WHERE oid = i.indrelid) "
    "WHEN 'd' THEN i.indisprimary WHEN 'i' THEN i.indisreplident ELSE false END"
)

#: The columns of a table in their order, and its primary key's columns.
COLUMNS_SQL = (
    "SELECT attname FROM pg_attribute WHERE attrelid = {table}::regclass AND attnum > 0 "
    "AND NOT attisdropped ORDER BY attnum"
)
KEY_SQL = (
    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = {table}::regclass AND i.indisprimary"
)
