"""Instagram-style ``next_id()`` for PostgreSQL, without Instagram's duplicates.

Instagram's function takes ``nextval(...) % 1024`` as the sequence: above 1024 inserts
per ms on one shard the 10 bits wrap and repeat. Here ids are ``unit << sequence_bits |
sequence`` values that only grow: each is ``GREATEST(last + 1, now_unit <<
sequence_bits)``. A full millisecond carries into the next one (the ids run ahead of the
clock during the burst, as Sonyflake's and CockroachDB's do), a clock that goes back
cannot repeat an id, and a rolled-back transaction cannot un-issue one, since sequences
are not transactional. ``CREATE SEQUENCE IF NOT EXISTS`` keeps that state when the
migration runs again.

The PL/pgSQL function keeps three small unlogged sequences beside the durable state
``name_state`` (an upper bound of every id issued, the sequence both languages share):
``name_issued`` (nextval gives the next value), ``name_block`` (the end of the block the
values may be issued from: the rest of one time unit) and ``name_reserved`` (what this
function last wrote to the state). The common call reads the block's end, then takes
``nextval``: issued when it is inside the block and not behind the clock. No lock, no
subtransaction, no WAL (an unlogged sequence writes none, so the transaction gets no
xid and its commit waits for no flush). Otherwise (the clock passed the block, the
block is full) the call takes a session-level advisory lock (held for the few
statements of the slow path, not the transaction), and under it starts a new block at
``GREATEST(floor + 1, now_unit << sequence_bits)``, where ``floor`` is the old block's
end, and also the state when ``name_reserved`` differs from it (the C function, a reset
or a crash moved or emptied something). It sets ``name_issued`` before ``name_block``;
the state, WAL-logged, is moved ``RESERVE_MS`` ahead first whenever the block would end
past it (once in about half a second).

Why no id is issued twice: every new block starts above the end of the one before, and
a call reads the block's end *before* its ``nextval``. A value taken before a new block's
``setval`` is at most the old block's end when it is issued, so below the new block; a
value taken after it belongs to the new block; and a call that read the new end took its
value after ``name_issued`` was set. Concurrent sessions never repeat an id, and a crash
(which empties the unlogged sequences) resumes above the state, which bounds every
issued id (its WAL record comes before any id of the block, so a committed row's commit
flushes it).

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

__all__ = [
    "C_LIBRARY",
    "DEFAULT_MAX_AHEAD_MS",
    "LANGUAGES",
    "RESERVE_MS",
    "NextIdFunction",
    "StateCheck",
]

#: How far ahead of the last issued id and of the statement's start a clock reading may
#: be before ``next_id`` refuses it: one hour.
DEFAULT_MAX_AHEAD_MS = 3_600_000
#: How far ahead of the issued ids the PL/pgSQL function moves its durable state at a time
#: (the C function's reserve too): one WAL-logged write in about half a second.
RESERVE_MS = 500

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
        """The durable state: an upper bound of every id either language issued."""
        return f"{self.name}_state"

    @property
    def sequences(self) -> tuple[str, ...]:
        """Every sequence the installed function uses (``check-db`` looks for each)."""
        if self.language == "c":
            return (self.sequence,)
        return (self.sequence, self.issued, self.block, self.reserved)

    @property
    def issued(self) -> str:
        """The PL/pgSQL function's last issued value (unlogged: emptied by a crash)."""
        return f"{self.name}_issued"

    @property
    def block(self) -> str:
        """The end of the block the PL/pgSQL function issues from without its lock
        (unlogged)."""
        return f"{self.name}_block"

    @property
    def reserved(self) -> str:
        """What the PL/pgSQL function last wrote to ``sequence`` (unlogged): while the two
        agree, nothing else moved the state."""
        return f"{self.name}_reserved"

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
        """The body of ``name_plpgsql(shard integer)``.

        The common case is one ``nextval`` of the unlogged ``name_issued`` inside the
        block ``name_block`` announces (the rest of one time unit): no lock, no
        subtransaction, no WAL. The advisory lock is taken only when the clock passed
        the block or the block is full; then a new block starts above everything
        issued, and the durable state is moved (``RESERVE_MS`` ahead) only when the
        block reaches past it. Why no id is issued twice is in the module doc.
        """
        layout = self.layout
        node_bits, shard_shift, shard_max = self._bits()
        seq_bits = layout.sequence_bits
        sequence, clock = f"{schema}.{self.sequence}", f"{schema}.{self.clock}"
        issued_seq, block_seq = f"{schema}.{self.issued}", f"{schema}.{self.block}"
        reserved_seq = f"{schema}.{self.reserved}"
        lock = f"{_LOCK_CLASS}, '{sequence}'::regclass::oid::integer"
        reserve = max(RESERVE_MS // layout.time_unit_ms, 1) << seq_bits
        last_value = ((layout.max_unit + 1) << seq_bits) - 1
        ahead = ""
        if self.max_ahead_ms is not None:
            units = -(-self.max_ahead_ms // layout.time_unit_ms)
            ahead = f"""
                IF now_unit - (floor_value >> {seq_bits}) > {units}
                   AND now_ms - (extract(epoch FROM statement_timestamp()) * 1000)::bigint
                       > {self.max_ahead_ms} THEN
                    -- one wild reading must not stamp every later id ahead of real time
                    RAISE EXCEPTION 'uid_fields: clock reading % is more than '
                        '{self.max_ahead_ms} ms ahead of the last issued id and of the '
                        'statement''s start; refused (max_ahead_ms)',
                        to_timestamp(now_ms / 1000.0)
                        USING ERRCODE = 'datetime_field_overflow';
                END IF;"""
        return f"""
DECLARE
    now_ms bigint;
    now_unit bigint;
    block_end bigint;
    issued bigint;
    durable bigint;
    reserved bigint;
    floor_value bigint;
BEGIN
    IF shard < 0 OR shard > {shard_max} THEN
        RAISE EXCEPTION 'shard % is out of range 0..{shard_max}', shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    now_ms := {clock}();
    now_unit := (now_ms - {layout.epoch_ms}) / {layout.time_unit_ms};
    -- the block is read before the value: a value taken after a new block began is
    -- above the old block's end, so it is never issued against the old one
    block_end := pg_sequence_last_value('{block_seq}'::regclass);
    issued := nextval('{issued_seq}'::regclass);
    IF block_end IS NULL OR issued > block_end OR issued < (now_unit << {seq_bits}) THEN
        PERFORM pg_advisory_lock({lock});
        BEGIN
            -- another session may have started the block this call needs
            block_end := pg_sequence_last_value('{block_seq}'::regclass);
            issued := nextval('{issued_seq}'::regclass);
            IF block_end IS NULL OR issued > block_end
               OR issued < (now_unit << {seq_bits}) THEN
                SELECT last_value INTO durable FROM {sequence};
                reserved := pg_sequence_last_value('{reserved_seq}'::regclass);
                -- above every id issued: the last block's end, and the state when this
                -- function did not write it last (the C function, a reset, a crash
                -- that emptied the unlogged sequences)
                floor_value := GREATEST(coalesce(block_end, -1),
                    CASE WHEN reserved IS DISTINCT FROM durable THEN durable ELSE -1 END);
                issued := GREATEST(floor_value + 1, now_unit << {seq_bits});{ahead}
                IF (issued >> {seq_bits}) > {layout.max_unit} THEN
                    -- checked before the state is written: setval is not transactional,
                    -- and a stored unit past the end would refuse every later call
                    RAISE EXCEPTION 'uid_fields: layout exhausted at '
                        '{layout.exhausted_at.isoformat()}'
                        USING ERRCODE = 'numeric_value_out_of_range';
                END IF;
                block_end := (((issued >> {seq_bits}) + 1) << {seq_bits}) - 1;
                IF reserved IS DISTINCT FROM durable OR block_end > durable THEN
                    -- durable (WAL-logged) before any id of the block leaves
                    reserved := LEAST(block_end + {reserve}, {last_value});
                    PERFORM setval('{sequence}', reserved, true);
                    PERFORM setval('{reserved_seq}', reserved, true);
                END IF;
                -- the values first, then the block that lets them be issued
                PERFORM setval('{issued_seq}', issued, true);
                PERFORM setval('{block_seq}', block_end, true);
            END IF;
        EXCEPTION WHEN OTHERS OR query_canceled THEN
            PERFORM pg_advisory_unlock({lock});
            RAISE;
        END;
        PERFORM pg_advisory_unlock({lock});
    END IF;
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
            *([] if self.language == "c" else [self._helpers_statement()]),
            f"CREATE OR REPLACE FUNCTION {self.clock}() RETURNS bigint LANGUAGE sql VOLATILE "
            f"AS $$ SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint $$",
            *implementation,
            main,
            wrapper,
            *reload,
        ]

    def _helpers_statement(self) -> str:
        """Create the PL/pgSQL function's unlogged sequences, if missing.

        Unlogged: their writes make no WAL and give the calling transaction no xid (so
        its commit waits for no flush), and a crash empties them, after which the
        function starts again above the durable state. Logged where the server has no
        unlogged sequences (before PostgreSQL 15): slower, as correct.
        """
        helpers = (self.issued, self.block, self.reserved)
        create = " ".join(
            f"EXECUTE 'CREATE ' || kind || 'SEQUENCE IF NOT EXISTS {name} AS bigint "
            "MINVALUE -1 START -1';"
            for name in helpers
        )
        # Whoever was granted the state sequence (the application's role, where another
        # one installs) calls the function: it gets the same rights on these.
        grant = (
            "FOR granted IN SELECT a.privilege_type AS privilege, CASE a.grantee WHEN 0 "
            "THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee "
            "FROM pg_class c, aclexplode(c.relacl) a "
            f"WHERE c.oid = '{self.sequence}'::regclass AND a.grantee <> c.relowner LOOP "
            f"EXECUTE format('GRANT %s ON SEQUENCE {', '.join(helpers)} TO %s', "
            "granted.privilege, granted.grantee); END LOOP;"
        )
        return (
            "DO $uid_install$ DECLARE granted record; kind text := CASE WHEN "
            "current_setting('server_version_num')::int >= 150000 THEN 'UNLOGGED ' "
            f"ELSE '' END; BEGIN {create} {grant} END $uid_install$"
        )

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
            f"DROP SEQUENCE IF EXISTS {self.issued}",
            f"DROP SEQUENCE IF EXISTS {self.block}",
            f"DROP SEQUENCE IF EXISTS {self.reserved}",
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
        # The PL/pgSQL function's sequence runs up to RESERVE_MS ahead too: while it
        # holds what that function wrote, the last issued id is in the current block.
        cursor.execute(
            f"SELECT coalesce({last}last_value), "
            f"pg_sequence_last_value(to_regclass('{self.block}')), "
            f"pg_sequence_last_value(to_regclass('{self.reserved}')) FROM {self.sequence}"
        )
        durable, block, reserved = cursor.fetchone()
        last_issued = int(durable)
        if self.language != "c" and block is not None:
            last_issued = int(block) if reserved == durable else max(last_issued, int(block))
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
            value = ((state.now_unit + 1) << state.sequence_bits) - 1
            cursor.execute(reset, (value,))
            # The PL/pgSQL function's block ends there too, and what it reserved is
            # forgotten, so its next call starts above the state that was set.
            cursor.execute(
                "SELECT setval(to_regclass(%s), %s, true), setval(to_regclass(%s), -1, false) "
                "WHERE to_regclass(%s) IS NOT NULL",
                (self.block, value, self.reserved, self.reserved),
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
