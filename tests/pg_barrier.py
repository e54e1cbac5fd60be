"""A server-side barrier that proves a fan-out's shard queries run at the same time.

Each shard's query calls ``uidf_barrier(marker, wanted, patience)`` once (an uncorrelated
subquery): it returns true once it has seen ``wanted`` backends of the cluster (itself
included) running a statement that contains ``marker`` while it ran, and false after
``patience`` seconds without: a query that sees another one running overlaps it. Shards
read one after another never have more than one such statement at once, so their
barrier times out and the query returns no rows: the test sees missing rows, not a
duration. The shards are databases of one PostgreSQL cluster, whose
``pg_stat_activity`` shows them all.
"""

from __future__ import annotations

import uuid

__all__ = ["BARRIER_FUNCTION", "barrier_sql", "new_marker"]

BARRIER_FUNCTION = """
CREATE OR REPLACE FUNCTION uidf_barrier(marker text, wanted integer, patience float8)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    until timestamptz := clock_timestamp() + make_interval(secs => patience);
    seen integer[] := '{}';
BEGIN
    LOOP
        PERFORM pg_stat_clear_snapshot();  -- else the view is read once per transaction
        SELECT array(SELECT DISTINCT unnest(seen || array_agg(pid))) INTO seen
            FROM pg_stat_activity
            WHERE state = 'active' AND position(marker IN query) > 0;
        IF cardinality(seen) >= wanted THEN
            -- Stay a moment, so the others (polling every 5 ms) see this one too.
            PERFORM pg_sleep(0.3);
            RETURN true;
        END IF;
        IF clock_timestamp() > until THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.005);
    END LOOP;
END $$
"""


def new_marker() -> str:
    """A marker no other statement of the cluster contains."""
    return f"uidf-barrier-{uuid.uuid4().hex}"


def barrier_sql(marker: str, wanted: int, patience: float = 3.0) -> str:
    """The WHERE condition that waits at the barrier (``marker`` is a plain literal)."""
    assert marker.replace("-", "").isalnum()
    return f"(SELECT uidf_barrier('{marker}', {int(wanted)}, {float(patience)}))"
