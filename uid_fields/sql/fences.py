"""The write fence of a shard move, as triggers in the source database.

While a move switches a range of logical shards to another database, the source must
take no write of that range: every row the new owner takes over has to be the last one
the application wrote. Stopping the application would do; a fence does it for the range
alone. It lives in the database, not in a process, because the writers are other
processes (every app server, cron jobs, a shell) that the mover cannot reach: a
``BEFORE INSERT``, ``BEFORE UPDATE`` and ``BEFORE DELETE`` trigger per table refuses
each row whose routing column falls in the range (``WHEN`` the same predicate the audit
counts with, ``uid_fields.placement.predicates``), in every session, whatever wrote it.

Each backend refuses in its own words, with one message this module reads back:

- PostgreSQL: ``RAISE EXCEPTION`` with SQLSTATE ``UF001`` (one function per fence,
  whose argument is the message);
- MySQL/MariaDB: ``SIGNAL SQLSTATE '45000'`` (a message of at most 128 characters);
- SQLite: ``RAISE(ABORT, ...)`` (a constraint error to the driver).

The message starts ``uid_fields fence:`` and names the move, the table and its logical
shards; ``refusal()`` turns it back into ``ShardMoveFencedError``, which both adapters
raise in place of the driver's error. Creating a trigger waits for the transactions
already writing the table (PostgreSQL's SHARE ROW EXCLUSIVE lock, MariaDB's metadata
lock, SQLite's single writer): once the fence is installed, every earlier write of the
range is committed and visible, and no later one gets in.

Every trigger (and PostgreSQL function) is named ``uid_fields_fence_<tag>_...``, where
the tag is a digest of the move's name: installing twice replaces, removing twice does
nothing, and ``leftovers_query()`` finds the fences a crashed operator left behind.

This module renders SQL only; ``uid_fields.ops.fences`` decides what to fence and runs
it through the adapters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ShardMoveFencedError

__all__ = [
    "EVENTS",
    "FENCE_PREFIX",
    "PG_SQLSTATE",
    "FenceSql",
    "FencedTable",
    "fence_tag",
    "leftovers_query",
    "refusal",
]

#: The start of every fence trigger's (and function's) name.
FENCE_PREFIX = "uid_fields_fence_"
#: The SQLSTATE of PostgreSQL's refusal (class ``UF``: implementation-defined).
PG_SQLSTATE = "UF001"
EVENTS = ("INSERT", "UPDATE", "DELETE")
VENDORS = ("postgresql", "mysql", "sqlite")
#: MariaDB's and MySQL's limit on a SIGNAL's MESSAGE_TEXT.
_MYSQL_MESSAGE = 128

_MESSAGE = re.compile(
    r"uid_fields fence: move (?P<move>.+?) closes (?P<table>\S+) "
    r"(?:logical shards (?P<low>\d+):(?P<high>\d+)|every row)"
)


def fence_tag(move: str) -> str:
    """Eight hex digits naming a move's fence (its triggers carry them)."""
    return hashlib.blake2b(move.encode(), digest_size=4).hexdigest()


def quote(vendor: str, name: str) -> str:
    """An identifier quoted for ``vendor`` (its own quote doubled)."""
    if vendor == "mysql":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def _literal(vendor: str, text: str) -> str:
    text = text.replace("'", "''")
    if vendor == "mysql":
        text = text.replace("\\", "\\\\")
    return f"'{text}'"


@dataclass(frozen=True)
class FencedTable:
    """One table of the move as the fence sees it.

    ``name`` is the table's (unquoted) name in the database, ``label`` what messages
    call it; ``low``/``high`` its logical shards (None: the whole table, for a route SQL
    cannot compute); ``new``/``old`` the range predicate over ``NEW.<column>`` and
    ``OLD.<column>`` (None: every row).
    """

    name: str
    label: str
    low: int | None
    high: int | None
    new: str | None
    old: str | None


def message(move: str, table: FencedTable, vendor: str) -> str:
    """What a refused write says (``refusal()`` reads it back)."""
    span = "every row" if table.low is None else f"logical shards {table.low}:{table.high}"
    text = f"uid_fields fence: move {move} closes {table.label} {span}"
    tail = "; retry once the new map is deployed"
    if vendor == "mysql" and len(text) > _MYSQL_MESSAGE:
        text = f"uid_fields fence: move {fence_tag(move)} closes {table.label} {span}"
    if vendor != "mysql" or len(text + tail) <= _MYSQL_MESSAGE:
        text += tail
    return text[:_MYSQL_MESSAGE] if vendor == "mysql" else text


class FenceSql:
    """The statements that install and remove the fence of ``move`` on one database."""

    def __init__(self, move: str, vendor: str, tables: Sequence[FencedTable]) -> None:
        if vendor not in VENDORS:
            raise ValueError(f"a fence needs PostgreSQL, MySQL/MariaDB or SQLite, not {vendor}")
        self.move, self.vendor, self.tables = move, vendor, list(tables)
        self.tag = fence_tag(move)
        self.function = f"{FENCE_PREFIX}{self.tag}"

    def trigger(self, table: FencedTable, event: str) -> str:
        """The trigger's name: per event and table (MariaDB and SQLite name triggers
        per schema), under 64 characters whatever the table is called."""
        table_tag = hashlib.blake2b(table.name.encode(), digest_size=3).hexdigest()
        return f"{FENCE_PREFIX}{self.tag}_{event[0].lower()}_{table_tag}"

    def names(self) -> list[str]:
        """Every trigger of the fence."""
        return [self.trigger(t, e) for t in self.tables for e in EVENTS]

    def _condition(self, table: FencedTable, event: str) -> str | None:
        if event == "INSERT":
            return table.new
        if event == "DELETE":
            return table.old
        if table.new is None or table.old is None:
            return None
        return f"({table.old} OR {table.new})"  # a row moved into or out of the range

    def install(self, events: Sequence[str] = EVENTS) -> list[str]:
        """Statements that (re)create the fence; running them twice is harmless."""
        found: list[str] = []
        if self.vendor == "postgresql":
            found.append(
                f"CREATE OR REPLACE FUNCTION {self.function}() RETURNS trigger "
                "LANGUAGE plpgsql AS $uid_fence$ BEGIN RAISE EXCEPTION USING "
                f"ERRCODE = '{PG_SQLSTATE}', MESSAGE = TG_ARGV[0]; END $uid_fence$"
            )
        for table in self.tables:
            for event in events:
                found.extend(self._trigger_sql(table, event))
        return found

    def _trigger_sql(self, table: FencedTable, event: str) -> list[str]:
        vendor, name = self.vendor, self.trigger(table, event)
        on = quote(vendor, table.name)
        condition = self._condition(table, event)
        said = _literal(vendor, message(self.move, table, vendor))
        head = f"CREATE TRIGGER {quote(vendor, name)} BEFORE {event} ON {on} FOR EACH ROW"
        if vendor == "postgresql":
            when = f" WHEN ({condition})" if condition else ""
            return [
                f"DROP TRIGGER IF EXISTS {quote(vendor, name)} ON {on}",
                f"{head}{when} EXECUTE FUNCTION {self.function}({said})",
            ]
        if vendor == "mysql":
            signal = f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = {said}"
            body = f"BEGIN IF {condition} THEN {signal}; END IF; END" if condition else signal
            return [f"DROP TRIGGER IF EXISTS {quote(vendor, name)}", f"{head} {body}"]
        when = f" WHEN {condition}" if condition else ""
        return [
            f"DROP TRIGGER IF EXISTS {quote(vendor, name)}",
            f"{head}{when} BEGIN SELECT RAISE(ABORT, {said}); END",
        ]

    def remove(self, events: Sequence[str] = EVENTS) -> list[str]:
        """Statements that drop the fence's triggers of ``events`` (all: the function
        too); running them twice is harmless."""
        vendor, found = self.vendor, []
        for table in self.tables:
            for event in events:
                name = quote(vendor, self.trigger(table, event))
                on = f" ON {quote(vendor, table.name)}" if vendor == "postgresql" else ""
                found.append(f"DROP TRIGGER IF EXISTS {name}{on}")
        if vendor == "postgresql" and set(events) == set(EVENTS):
            found.append(f"DROP FUNCTION IF EXISTS {self.function}()")
        return found

    def installed_query(self) -> str:
        """A query whose rows are the names of this fence's triggers that exist."""
        return leftovers_query(self.vendor, f"{FENCE_PREFIX}{self.tag}_")


def leftovers_query(vendor: str, prefix: str = FENCE_PREFIX) -> str:
    """A query of ``(trigger, table)`` for every fence trigger (of the current schema)
    whose name starts with ``prefix``: fences a move left installed."""
    if not re.fullmatch(r"[a-z0-9_]+", prefix):
        raise ValueError(f"not a fence name prefix: {prefix!r}")
    size, want = len(prefix), f"'{prefix}'"
    if vendor == "postgresql":
        return (
            "SELECT t.tgname, c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace "
            f"AND substr(t.tgname, 1, {size}) = {want} ORDER BY 1"
        )
    if vendor == "mysql":
        return (
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS "
            f"WHERE TRIGGER_SCHEMA = DATABASE() AND SUBSTR(TRIGGER_NAME, 1, {size}) = {want} "
            "ORDER BY 1"
        )
    return (
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger' "
        f"AND substr(name, 1, {size}) = {want} ORDER BY 1"
    )


def refusal(error: BaseException, database: str | None = None) -> ShardMoveFencedError | None:
    """The ``ShardMoveFencedError`` a driver's error stands for, when a fence refused
    the write (else None): the adapters raise it from the driver's error."""
    found = _MESSAGE.search(str(error))
    if found is None:
        return None
    low, high = found["low"], found["high"]
    span = "every row" if low is None else f"logical shards {low}..{int(high) - 1}"
    on = f" on {database}" if database else ""
    return ShardMoveFencedError(
        f"the shard move {found['move']} has closed {span} of {found['table']} for "
        f"writes{on} while it switches them to another database; nothing was written. "
        "Retry shortly: once the new map is deployed the write goes to the new database",
        move=found["move"],
        table=found["table"],
        low=None if low is None else int(low),
        high=None if high is None else int(high),
        database=database,
    )
