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
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .. import validate as check
from ..layouts import SnowflakeLayout

__all__ = ["NextIdFunction"]

_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# First key of the two-int advisory lock form, so the lock never meets an application's
# own single-bigint advisory locks. ("uidf" in ASCII.)
_LOCK_CLASS = 0x75696466


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
    """

    layout: SnowflakeLayout
    shard: int
    name: str = "uid_next_id"
    shard_field: str = "shard"
    node: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        sql_identifier(self.name, "function name")
        if self.shard_field not in self.layout.field_names:
            raise ValueError(f"layout has no {self.shard_field!r} field for the shard")
        if self.layout.time_unit_ms < 1 or self.layout.low_fields:
            raise ValueError("database-side generation supports layouts without low fields")
        bits = self.layout.field_bits(self.shard_field)
        check.integer("shard", self.shard, 0, (1 << bits) - 1)

    @property
    def sequence(self) -> str:
        return f"{self.name}_state"

    @property
    def call(self) -> str:
        """The column default expression."""
        return f"{self.name}()"

    def create_statements(self) -> list[str]:
        layout = self.layout
        node = dict(self.node or {})
        node.pop(self.shard_field, None)
        node_bits = layout.node_bits(node)
        shard_shift = layout.field_shift(self.shard_field)
        shard_max = (1 << layout.field_bits(self.shard_field)) - 1
        seq_bits = layout.sequence_bits
        body = f"""
DECLARE
    now_unit bigint;
    last_issued bigint;
    issued bigint;
BEGIN
    IF shard < 0 OR shard > {shard_max} THEN
        RAISE EXCEPTION 'shard % is out of range 0..{shard_max}', shard
            USING ERRCODE = 'numeric_value_out_of_range';
    END IF;
    now_unit := (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
                 - {layout.epoch_ms}) / {layout.time_unit_ms};
    PERFORM pg_advisory_lock({_LOCK_CLASS}, '{self.sequence}'::regclass::oid::integer);
    BEGIN
        SELECT last_value INTO last_issued FROM {self.sequence};
        issued := GREATEST(last_issued + 1, now_unit << {seq_bits});
        IF (issued >> {seq_bits}) > {layout.max_unit} THEN
            -- checked before the state is written: setval is not transactional, and a
            -- stored unit past the end would refuse every later call
            RAISE EXCEPTION 'uid_fields: layout exhausted at {layout.exhausted_at.isoformat()}'
                USING ERRCODE = 'numeric_value_out_of_range';
        END IF;
        PERFORM setval('{self.sequence}', issued, true);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock({_LOCK_CLASS}, '{self.sequence}'::regclass::oid::integer);
        RAISE;
    END;
    PERFORM pg_advisory_unlock({_LOCK_CLASS}, '{self.sequence}'::regclass::oid::integer);
    RETURN ((issued >> {seq_bits}) << {layout.time_shift})
         | (shard::bigint << {shard_shift})
         | {node_bits}
         | (issued & {layout.max_sequence});
END
"""
        return [
            f"CREATE SEQUENCE IF NOT EXISTS {self.sequence} AS bigint MINVALUE 0 START 0",
            # SET search_path FROM CURRENT pins the schema the function was installed
            # in: its sequence and its sibling are found whatever the caller's
            # search_path (one schema per logical shard, as Instagram ran it).
            f"CREATE OR REPLACE FUNCTION {self.name}(shard integer) RETURNS bigint "
            f"LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT "
            f"AS $uid_fields${body}$uid_fields$",
            f"CREATE OR REPLACE FUNCTION {self.name}() RETURNS bigint "
            f"LANGUAGE sql VOLATILE SET search_path FROM CURRENT "
            f"AS $$ SELECT {self.name}({self.shard}) $$",
        ]

    def drop_statements(self) -> list[str]:
        return [
            f"DROP FUNCTION IF EXISTS {self.name}()",
            f"DROP FUNCTION IF EXISTS {self.name}(integer)",
            f"DROP SEQUENCE IF EXISTS {self.sequence}",
        ]
