-- The uid_fields extension, version 1.1: the C functions behind the per-table next_id()
-- functions the uid_fields Python package installs (LANGUAGE sql, owned by the
-- application's role). The functions that read or move a state are executable only by
-- the roles they are granted to (a superuser: GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA
-- uid_fields TO <role>; the package's install does it when its role may), and each of
-- them needs UPDATE on that state sequence, which the application owns. In 1.0 PUBLIC
-- could execute them, and any role with a login could fill the server's shared table of
-- states (issue 37).

\echo Use "CREATE EXTENSION uid_fields" to load this file. \quit

GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;

-- The next id of the state sequence ``state`` for ``shard``: the layout is given as
-- constants by the calling SQL function (uid_fields.sql.postgres.NextIdFunction).
CREATE FUNCTION next_id(
    state regclass, shard integer, epoch_ms bigint, unit_ms bigint, time_shift integer,
    shard_shift integer, sequence_bits integer, node_bits bigint, shard_max integer,
    max_unit bigint, max_ahead_ms bigint
) RETURNS bigint
    AS 'MODULE_PATHNAME', 'uid_fields_next_id' LANGUAGE c VOLATILE STRICT;

-- Bring a state back to ``value`` (check-db --fix, after a clock that ran ahead).
CREATE FUNCTION reset_state(state regclass, value bigint) RETURNS void
    AS 'MODULE_PATHNAME', 'uid_fields_reset_state' LANGUAGE c VOLATILE STRICT;

-- Start a state again from its sequence, as after a restart (run by every install).
CREATE FUNCTION reload_state(state regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'uid_fields_reload_state' LANGUAGE c VOLATILE STRICT;

-- The last value issued from this server's memory (NULL before the first call).
CREATE FUNCTION last_issued(state regclass) RETURNS bigint
    AS 'MODULE_PATHNAME', 'uid_fields_last_issued' LANGUAGE c VOLATILE STRICT;

-- The loaded library's version (the SQL's is pg_extension.extversion).
CREATE FUNCTION version() RETURNS text
    AS 'MODULE_PATHNAME', 'uid_fields_version' LANGUAGE c IMMUTABLE STRICT;

-- The states share one table of the server's shared memory: only the roles granted
-- these functions may take an entry.
REVOKE EXECUTE ON FUNCTION
    next_id(regclass, integer, bigint, bigint, integer, integer, integer, bigint, integer,
            bigint, bigint),
    reset_state(regclass, bigint),
    reload_state(regclass),
    last_issued(regclass)
FROM PUBLIC;
