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

Two implementations (``language``) behind one inlined SQL ``name(shard)``: the PL/pgSQL
``name_plpgsql`` above (nothing to install on the server), and the C
``uid_fields.next_id(...)`` of the ``uid_fields`` extension (``postgres/uid_fields.c``,
see ``pg_extension``), which keeps the last id in shared memory (compare-and-swap, no
lock) and writes the sequence only as a flushed ceiling half a second ahead; it needs
``shared_preload_libraries`` and ``CREATE EXTENSION uid_fields`` in the database, after
which ``name(shard)`` is plain SQL any role may create. Both read the sequence as an
upper bound of every issued id and move it under the same advisory lock, so either may
replace the other on a live database.

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

from .._internal import validate as check
from ..ids.layouts import SnowflakeLayout
from .pg_extension import EXTENSION, check_statement, extension_problem, grant_statement

__all__ = ["C_LIBRARY", "DEFAULT_MAX_AHEAD_MS", "LANGUAGES", "NextIdFunction", "StateCheck"]

#: How far ahead of the last issued id and of the statement's start a clock reading may
#: be before ``next_id`` refuses it: one hour.
DEFAULT_MAX_AHEAD_MS = 3_600_000

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# First key of the two-int advisory lock form, so the lock never meets an application's
# own single-bigint advisory locks. ("uidf" in ASCII.)
_LOCK_CLASS = 0x75696466


#: Where a function's own schema goes in ``NextIdFunction.body()``.
SCHEMA = "__uid_fields_schema__"

#: How ``next_id`` can be made: the PL/pgSQL function (the default: nothing to install on
#: the server), or the C one of the ``uid_fields`` extension (faster; the server must
#: preload its library and the database must have the extension).
LANGUAGES = ("plpgsql", "c")
#: The C function's library (and extension, and schema of its functions).
C_LIBRARY = EXTENSION
# Per-table C functions of releases before the extension (LANGUAGE c, one per table):
# dropped with the function.
_C_ARGUMENTS = (
    "state regclass, shard integer, epoch_ms bigint, unit_ms bigint, time_shift integer, "
    "shard_shift integer, sequence_bits integer, node_bits bigint, shard_max integer, "
    "max_unit bigint, max_ahead_ms bigint"
)
_REFUSE = (
    " BEGIN RAISE EXCEPTION 'this database owns no logical shard yet: deploy a shard map "
    "that gives it a range, then run check-db --fix'; END "
)
_C_TYPES = ",".join(argument.split()[1] for argument in _C_ARGUMENTS.split(", "))


def _in_current_schema(statement: str, qualified: str | None = None) -> str:
    """``statement`` (a ``format()`` template, the schema as ``%1$s``) run by a DO block
    with the quoted name of the schema it is installed in; ``qualified``: a name in that
    schema, given as ``%2$L`` (a string literal of the qualified name)."""
    extra = f", quote_ident(current_schema()) || '.{qualified}'" if qualified else ""
    return (
        "DO $uid_install$ BEGIN EXECUTE format("
        f"$uid_ddl${statement}$uid_ddl$, quote_ident(current_schema()){extra}); "
        "END $uid_install$"
    )


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
    #: One of ``LANGUAGES``: both issue the same ids from the same state sequence, and
    #: either may replace the other on a live database.
    language: str = "plpgsql"

    def __post_init__(self) -> None:
        sql_identifier(self.name, "function name")
        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {list(LANGUAGES)}; got {self.language!r}")
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

    @property
    def implementation(self) -> str:
        """The function that does the work, by ``language``: ``name_plpgsql(shard)`` (in
        the function's own schema) or the extension's ``uid_fields.next_id(state, shard,
        layout...)``."""
        return f"{self.name}_plpgsql" if self.language != "c" else f"{EXTENSION}.next_id"

    def body(self, schema: str = SCHEMA) -> str:
        """The body of ``name(shard integer)``, its own objects qualified with ``schema``
        (an already quoted identifier; ``SCHEMA`` is the placeholder the install
        statement fills with the schema it runs in).

        Always one SQL statement, which the planner inlines into the caller, calling the
        implementation: so a switch of ``language`` on a live database replaces a SQL
        body with a SQL body. (Replacing a PL/pgSQL function by a SQL one while another
        session calls it fails that call: PostgreSQL reads the language and the source
        in two lookups.)
        """
        return self._call(schema, "shard")

    def wrapper_body(self, schema: str = SCHEMA) -> str:
        """The body of ``name()``: the implementation called with this database's logical
        shard (directly, not through ``name(shard)``: one level of inlining less to plan
        on every statement), or a refusal while the database owns none."""
        if self.shard is None:
            return _REFUSE
        return self._call(schema, str(self.shard))

    def installed_bodies(self, schema: str = SCHEMA) -> dict[str, str]:
        """What ``pg_proc.prosrc`` must hold, by signature, for each function whose body
        the layout, the language and the shard decide (``check-db`` compares them)."""
        implementation = (
            {}
            if self.language == "c"
            else {f"{self.implementation}(integer)": self.plpgsql_body(schema)}
        )
        return {
            **implementation,
            f"{self.name}(integer)": self.body(schema),
            f"{self.name}()": self.wrapper_body(schema),
        }

    def _call(self, schema: str, shard: str, sequence: str | None = None) -> str:
        """One SELECT of the implementation for ``shard`` (an expression); ``sequence``:
        the state sequence as a string literal (by default, qualified with ``schema``)."""
        if self.language != "c":
            return f" SELECT {schema}.{self.implementation}({shard}) "
        # The C function takes the layout as constants and the state sequence as a
        # regclass resolved with its schema.
        layout = self.layout
        node_bits, shard_shift, shard_max = self._bits()
        arguments = (
            f"{sequence or _sql_literal(f'{schema}.{self.sequence}')}::regclass",
            shard,
            str(layout.epoch_ms),
            str(layout.time_unit_ms),
            str(layout.time_shift),
            str(shard_shift),
            str(layout.sequence_bits),
            str(node_bits),
            str(shard_max),
            str(layout.max_unit),
            str(self.max_ahead_ms or 0),
        )
        return f" SELECT {self.implementation}({', '.join(arguments)}) "

    def _bits(self) -> tuple[int, int, int]:
        """What both implementations put into an id besides its time and sequence: the
        fixed node bits, the shard field's shift, and the largest shard."""
        layout = self.layout
        node = dict(self.node or {})
        node.pop(self.shard_field, None)
        shard_max = (1 << layout.field_bits(self.shard_field)) - 1
        return layout.node_bits(node), layout.field_shift(self.shard_field), shard_max

    def plpgsql_body(self, schema: str = SCHEMA) -> str:
        """The body of ``name_plpgsql(shard integer)``."""
        layout = self.layout
        node_bits, shard_shift, shard_max = self._bits()
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
        # %2$L: the state sequence qualified with the schema, as a string literal.
        main = _in_current_schema(
            f"CREATE OR REPLACE FUNCTION %1$s.{self.name}(shard integer) RETURNS bigint "
            f"LANGUAGE sql VOLATILE AS $uid_fields${self._call('%1$s', 'shard', '%2$L')}"
            "$uid_fields$",
            self.sequence,
        )
        if self.shard is None:
            wrapper = _in_current_schema(
                f"CREATE OR REPLACE FUNCTION %1$s.{self.name}() RETURNS bigint "
                f"LANGUAGE plpgsql VOLATILE AS $uid_fields${_REFUSE}$uid_fields$"
            )
        else:
            wrapper = _in_current_schema(
                f"CREATE OR REPLACE FUNCTION %1$s.{self.name}() RETURNS bigint LANGUAGE sql "
                f"VOLATILE AS $uid_fields${self._call('%1$s', str(self.shard), '%2$L')}"
                "$uid_fields$",
                self.sequence,
            )
        reload, check = [], []
        if self.language == "c":
            # The extension's functions are there, of this package's version, the
            # library is preloaded and this role may execute them; or the install stops
            # here saying which and the fix.
            check = [check_statement()]
            implementation = []
            # The owners of the functions and of the sequence may run the extension's
            # functions (granted when this role may grant them: a superuser's install);
            # then, what this server's memory holds from an earlier time as the C
            # function may be below ids the PL/pgSQL function issued since: start from
            # the sequence.
            owned = [f"pg_proc:{self.name}()", f"pg_proc:{self.name}(integer)"]
            reload = [
                grant_statement([*owned, f"pg_class:{self.sequence}"]),
                f"SELECT {EXTENSION}.reload_state('{self.sequence}')",
            ]
        else:
            template = self.plpgsql_body().replace("%", "%%").replace(SCHEMA, "%1$s")
            implementation = [
                _in_current_schema(
                    f"CREATE OR REPLACE FUNCTION %1$s.{self.implementation}(shard integer) "
                    f"RETURNS bigint LANGUAGE plpgsql VOLATILE AS $uid_fields${template}"
                    "$uid_fields$"
                )
            ]
        return [
            *check,
            f"CREATE SEQUENCE IF NOT EXISTS {self.sequence} AS bigint MINVALUE 0 START 0",
            f"CREATE OR REPLACE FUNCTION {self.clock}() RETURNS bigint LANGUAGE sql VOLATILE "
            f"AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$",
            *implementation,
            main,
            wrapper,
            *reload,
        ]

    def drop_statements(self) -> list[str]:
        return [
            f"DROP FUNCTION IF EXISTS {self.name}()",
            f"DROP FUNCTION IF EXISTS {self.name}(integer)",
            f"DROP FUNCTION IF EXISTS {self.name}_plpgsql(integer)",
            f"DROP FUNCTION IF EXISTS {self.name}_c({_C_TYPES})",
            f"DROP FUNCTION IF EXISTS {self.name}_c_reset(regclass, bigint)",
            f"DROP FUNCTION IF EXISTS {self.name}_c_reload(regclass)",
            f"DROP FUNCTION IF EXISTS {self.name}_c_last(regclass)",
            f"DROP FUNCTION IF EXISTS {self.clock}()",
            f"DROP SEQUENCE IF EXISTS {self.sequence}",
        ]

    def server_problem(self, cursor: Any) -> str | None:
        """What keeps the cursor's database from running this function, with the fix:
        for the C one, the ``uid_fields`` extension missing, not preloaded or of another
        version (``pg_extension.problem_query``); None when nothing does."""
        return extension_problem(cursor) if self.language == "c" else None

    # -- the state: checked and reset over a DB-API cursor ---------------------------------
    def check_state(self, cursor: Any, tables: Iterable[str] = ()) -> StateCheck:
        """How far the state is ahead of the database's clock, and whether it can be reset.

        ``tables`` are the tables (plain or schema-qualified identifiers) whose id column
        ``id`` this function fills on this database.
        """
        layout = self.layout
        problem = self.server_problem(cursor)
        if problem:
            raise RuntimeError(problem)
        # The C function's sequence holds a ceiling up to half a second ahead of what it
        # issued: the last issued value is in the server's memory.
        last = f"{EXTENSION}.last_issued('{self.sequence}'), " if self.language == "c" else ""
        cursor.execute(f"SELECT coalesce({last}last_value) FROM {self.sequence}")
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
        reset = (
            f"SELECT {EXTENSION}.reset_state('{self.sequence}', %s)"
            if self.language == "c"
            else f"SELECT setval('{self.sequence}', %s, true)"
        )
        try:
            # To the end of the current unit, not its start: an id of this unit may
            # already be stored (only later ones make the reset unsafe).
            cursor.execute(reset, (((state.now_unit + 1) << state.sequence_bits) - 1,))
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
