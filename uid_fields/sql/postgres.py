"""Instagram-style ``next_id()`` for PostgreSQL, without Instagram's duplicates.

Instagram's function takes ``nextval(...) % 1024`` as the sequence: above 1024 inserts
per ms on one shard the 10 bits wrap and repeat. Here the sequence object holds the
last issued ``unit << sequence_bits | sequence`` and each call issues
``GREATEST(last + 1, now_unit << sequence_bits)`` under a session-level advisory lock
that is held only for the few statements of the call (not the transaction). A full
millisecond carries into the next one (the ids run ahead of the clock during the
burst, as Sonyflake's and CockroachDB's do), a clock that goes back cannot repeat an
id, and a rolled-back transaction cannot un-issue one, since sequences are not
transactional. ``CREATE SEQUENCE IF NOT EXISTS`` keeps that state when the migration
runs again.

The same layout object decodes what the function makes.

Bad clocks. A reading past the layout's end raises before any state is written. A
reading more than ``max_ahead_ms`` ahead of both the last issued id and the start of the
calling statement (``statement_timestamp()``) is refused with SQLSTATE 22008
(``datetime_field_overflow``): one wild reading would otherwise stamp every later id
that far ahead until real time caught up. The statement's start is the second opinion
that tells a wild reading from a database that was merely idle (after a quiet day the
last id is a day old, but the statement began a moment ago). The clock is read through
``<name>_clock()`` (Unix ms), a one-line SQL function a test may replace. If a state
did get ahead (a clock that was wrong for longer), ``reset_state`` brings it back to
now when no stored id is stamped later than now.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import validate as check
from ..layouts import SnowflakeLayout

__all__ = ["DEFAULT_MAX_AHEAD_MS", "NextIdFunction", "StateCheck"]

#: How far ahead of the last issued id and of the statement's start a clock reading may
#: be before ``next_id`` refuses it: one hour.
DEFAULT_MAX_AHEAD_MS = 3_600_000

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# First key of the two-int advisory lock form, so the lock never meets an application's
# own single-bigint advisory locks. ("uidf" in ASCII.)
_LOCK_CLASS = 0x75696466


#: Where a function's own schema goes in ``NextIdFunction.body()``.
SCHEMA = "__uid_fields_schema__"


def _in_current_schema(statement: str) -> str:
    """``statement`` (a ``format()`` template, the schema as ``%1$s``) run by a DO block
    with the quoted name of the schema it is installed in."""
    return (
        "DO $uid_install$ BEGIN EXECUTE format("
        f"$uid_ddl${statement}$uid_ddl$, quote_ident(current_schema())); END $uid_install$"
    )


def sql_identifier(name: object, what: str) -> str:
    """``name`` if it is a plain lower-case SQL identifier; ``ValueError`` naming it.

    Function names go into DDL and column defaults as text, never as parameters.
    """
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{what} {name!r} must be a lower-case SQL identifier")
    return name


@dataclass(frozen=True)
class NextIdFunction:
    """The DDL of one shard database's ``next_id`` function and its state sequence.

    ``shard`` is the logical shard that ids made by the plain ``name()`` carry;
    ``name(shard integer)`` makes ids for another logical shard (to co-locate by key).
    ``shard=None`` is for a database that owns no logical shard yet (an ``incoming``
    one of its map): its tables get their defaults, and ``name()`` refuses to make an
    id until a map that gives it a range is deployed and ``check-db --fix`` runs.
    """

    layout: SnowflakeLayout
    shard: int | None
    name: str = "uid_next_id"
    shard_field: str = "shard"
    node: Mapping[str, int] | None = None
    #: Refuse clock readings this far ahead (see the module doc); None: never refuse.
    max_ahead_ms: int | None = DEFAULT_MAX_AHEAD_MS

    def __post_init__(self) -> None:
        sql_identifier(self.name, "function name")
        if self.max_ahead_ms is not None:
            check.integer("max_ahead_ms", self.max_ahead_ms, 1, 10**12)
        if self.shard_field not in self.layout.field_names:
            raise ValueError(f"layout has no {self.shard_field!r} field for the shard")
        if self.layout.time_unit_ms < 1 or self.layout.low_fields:
            raise ValueError("database-side generation supports layouts without low fields")
        bits = self.layout.field_bits(self.shard_field)
        if self.shard is not None:
            check.integer("shard", self.shard, 0, (1 << bits) - 1)

    @property
    def sequence(self) -> str:
        return f"{self.name}_state"

    @property
    def clock(self) -> str:
        """The function that reads the clock (Unix ms)."""
        return f"{self.name}_clock"

    @property
    def call(self) -> str:
        """The column default expression."""
        return f"{self.name}()"

    def body(self, schema: str = SCHEMA) -> str:
        """The PL/pgSQL body of ``name(shard integer)``, its own objects qualified with
        ``schema`` (an already quoted identifier; ``SCHEMA`` is the placeholder the
        install statement fills with the schema it runs in)."""
        layout = self.layout
        node = dict(self.node or {})
        node.pop(self.shard_field, None)
        node_bits = layout.node_bits(node)
        shard_shift = layout.field_shift(self.shard_field)
        shard_max = (1 << layout.field_bits(self.shard_field)) - 1
        seq_bits = layout.sequence_bits
        sequence, clock = f"{schema}.{self.sequence}", f"{schema}.{self.clock}"
        ahead = ""
        if self.max_ahead_ms is not None:
            units = -(-self.max_ahead_ms // layout.time_unit_ms)
            ahead = f"""
        IF now_unit - (last_issued >> {seq_bits}) > {units}
           AND now_ms - (extract(epoch FROM statement_timestamp()) * 1000)::bigint
               > {self.max_ahead_ms} THEN
            -- one wild reading must not stamp every later id ahead of real time
            RAISE EXCEPTION 'uid_fields: clock reading % is more than {self.max_ahead_ms} ms '
                'ahead of the last issued id and of the statement''s start; refused '
                '(max_ahead_ms)', to_timestamp(now_ms / 1000.0)
                USING ERRCODE = 'datetime_field_overflow';
        END IF;"""
        return f"""
DECLARE
    now_ms bigint;
    now_unit bigint;
    last_issued bigint;
    issued bigint;
BEGIN
    IF shard < 0 OR shard > {shard_max} THEN
        RAISE EXCEPTION 'shard % is out of range 0..{shard_max}', shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    now_ms := {clock}();
    now_unit := (now_ms - {layout.epoch_ms}) / {layout.time_unit_ms};
    PERFORM pg_advisory_lock({_LOCK_CLASS}, '{sequence}'::regclass::oid::integer);
    BEGIN
        SELECT last_value INTO last_issued FROM {sequence};
        issued := GREATEST(last_issued + 1, now_unit << {seq_bits});{ahead}
        IF (issued >> {seq_bits}) > {layout.max_unit} THEN
            -- checked before the state is written: setval is not transactional, and a
            -- stored unit past the end would refuse every later call
            RAISE EXCEPTION 'uid_fields: layout exhausted at {layout.exhausted_at.isoformat()}'
                USING ERRCODE = 'numeric_value_out_of_range';
        END IF;
        PERFORM setval('{sequence}', issued, true);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock({_LOCK_CLASS}, '{sequence}'::regclass::oid::integer);
        RAISE;
    END;
    PERFORM pg_advisory_unlock({_LOCK_CLASS}, '{sequence}'::regclass::oid::integer);
    RETURN ((issued >> {seq_bits}) << {layout.time_shift})
         | (shard::bigint << {shard_shift})
         | {node_bits}
         | (issued & {layout.max_sequence});
END
"""

    def create_statements(self) -> list[str]:
        # The functions name their sequence, clock and sibling with the schema they are
        # installed in, filled in by the install statement itself (static SQL, so
        # migrations can print it): they work whatever the caller's search_path (one
        # schema per logical shard, as Instagram ran it). Not pinning search_path on the
        # function (SET search_path FROM CURRENT) saves a configuration switch on every
        # call: about a third of the call's cost.
        template = self.body().replace("%", "%%").replace(SCHEMA, "%1$s")
        main = (
            f"CREATE OR REPLACE FUNCTION %1$s.{self.name}(shard integer) RETURNS bigint "
            f"LANGUAGE plpgsql VOLATILE AS $uid_fields${template}$uid_fields$"
        )
        wrapper = (
            f"CREATE OR REPLACE FUNCTION %1$s.{self.name}() RETURNS bigint "
            f"LANGUAGE sql VOLATILE AS $$ SELECT %1$s.{self.name}({self.shard}) $$"
        )
        if self.shard is None:
            wrapper = (
                f"CREATE OR REPLACE FUNCTION %1$s.{self.name}() RETURNS bigint "
                "LANGUAGE plpgsql VOLATILE AS $$ BEGIN RAISE EXCEPTION "
                "'this database owns no logical shard yet: deploy a shard map that gives "
                "it a range, then run check-db --fix'; END $$"
            )
        return [
            f"CREATE SEQUENCE IF NOT EXISTS {self.sequence} AS bigint MINVALUE 0 START 0",
            f"CREATE OR REPLACE FUNCTION {self.clock}() RETURNS bigint LANGUAGE sql VOLATILE "
            f"AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$",
            _in_current_schema(main),
            _in_current_schema(wrapper),
        ]

    def drop_statements(self) -> list[str]:
        return [
            f"DROP FUNCTION IF EXISTS {self.name}()",
            f"DROP FUNCTION IF EXISTS {self.name}(integer)",
            f"DROP FUNCTION IF EXISTS {self.clock}()",
            f"DROP SEQUENCE IF EXISTS {self.sequence}",
        ]

    # -- the state: checked and reset over a DB-API cursor ---------------------------------
    def check_state(self, cursor: Any, tables: Iterable[str] = ()) -> StateCheck:
        """How far the state is ahead of the database's clock, and whether it can be reset.

        ``tables`` are the tables (plain or schema-qualified identifiers) whose id column
        ``id`` this function fills on this database.
        """
        layout = self.layout
        cursor.execute(f"SELECT last_value FROM {self.sequence}")
        last_issued = int(cursor.fetchone()[0])
        cursor.execute("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint")
        now_unit = (int(cursor.fetchone()[0]) - layout.epoch_ms) // layout.time_unit_ms
        stored = 0
        for table in tables:
            for part in table.split("."):
                sql_identifier(part, "table")
            cursor.execute(f"SELECT max(id) FROM {table}")
            value = cursor.fetchone()[0]
            if value is not None:
                stored = max(stored, int(value) >> layout.time_shift)
        return StateCheck(
            ahead_ms=max(0, (last_issued >> layout.sequence_bits) - now_unit) * layout.time_unit_ms,
            stored_ahead_ms=max(0, stored - now_unit) * layout.time_unit_ms,
            now_unit=now_unit,
            sequence_bits=layout.sequence_bits,
        )

    def reset_state(self, cursor: Any, tables: Iterable[str] = ()) -> StateCheck:
        """Bring a state that ran ahead of the clock back to now, if that is safe.

        Safe when no id stored in ``tables`` is stamped later than now: ids issued from
        now on cannot meet one already handed out. Otherwise ``ValueError`` says until
        when to wait. The sequence is set under the function's own advisory lock.
        """
        state = self.check_state(cursor, tables)
        if not state.ahead_ms:
            return state
        if state.stored_ahead_ms:
            raise ValueError(
                f"{self.name}(): stored ids are stamped up to {state.stored_ahead_ms} ms "
                "ahead of the clock; resetting the state to now could issue them again. "
                "Wait until real time has passed them"
            )
        lock = f"{_LOCK_CLASS}, '{self.sequence}'::regclass::oid::integer"
        cursor.execute(f"SELECT pg_advisory_lock({lock})")
        try:
            cursor.execute(
                f"SELECT setval('{self.sequence}', %s, true)",
                ((state.now_unit << state.sequence_bits) - 1,),
            )
        finally:
            cursor.execute(f"SELECT pg_advisory_unlock({lock})")
        return self.check_state(cursor, tables)


@dataclass(frozen=True)
class StateCheck:
    """What ``NextIdFunction.check_state`` found."""

    #: How far the last issued id is stamped ahead of the database's clock (0: not ahead).
    ahead_ms: int
    #: How far the latest stored id is stamped ahead of the clock.
    stored_ahead_ms: int
    now_unit: int
    sequence_bits: int

    @property
    def resettable(self) -> bool:
        return self.ahead_ms > 0 and self.stored_ahead_ms == 0
