-- The SQL-visible behaviour of the uid_fields extension, on a server that preloads the
-- library (make installcheck). Ids of the Instagram layout from 2024-01-01: 41 bits of
-- milliseconds, 13 of shard, 10 of sequence.
SET TimeZone = 'UTC';
CREATE EXTENSION uid_fields;

-- The version, as the library and the SQL report it.
SELECT extversion = uid_fields.version() AS same_version,
       current_setting('uid_fields.loaded_version') = extversion AS setting_agrees
  FROM pg_extension WHERE extname = 'uid_fields';

CREATE SEQUENCE ids_state AS bigint MINVALUE 0 START 0;
CREATE FUNCTION ids(shard integer) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT uid_fields.next_id('ids_state'::regclass, shard, 1704067200000, 1, 23, 10, 10,
                              0, 8191, 2199023255551, 3600000) $$;

-- Monotonic: far more ids than 1024 per ms, each above the one before, on shard 5, on time.
CREATE TEMP TABLE made AS SELECT g, ids(5) AS id FROM generate_series(1, 20000) g;
SELECT count(DISTINCT id) AS distinct_ids,
       bool_and(id > previous) AS increasing,
       bool_and((id >> 10) & 8191 = 5) AS on_shard_5,
       bool_and(abs((id >> 23) + 1704067200000
                    - extract(epoch FROM clock_timestamp()) * 1000) < 60000) AS on_time
  FROM (SELECT id, lag(id, 1, 0::bigint) OVER (ORDER BY g) AS previous FROM made) ids;
SELECT ids(8192);

-- The state: the last issued value is the last id's time and sequence; the sequence holds
-- a ceiling at or above it.
SELECT uid_fields.last_issued('ids_state') = ((max(id) >> 23) << 10 | (max(id) & 1023))
       AS last_is_the_last_id,
       (SELECT last_value FROM ids_state) >= uid_fields.last_issued('ids_state')
       AS ceiling_above
  FROM made;

-- Clock offsets: a reading a day ahead is refused (max_ahead_ms) and leaves the state
-- alone; a clock stepped back five seconds repeats nothing.
SELECT uid_fields.last_issued('ids_state') AS before_refusal \gset
SET uid_fields.clock_offset_ms = 86400000;
DO $$
BEGIN
    PERFORM ids(5);
    RAISE NOTICE 'not refused';
EXCEPTION WHEN datetime_field_overflow THEN
    RAISE NOTICE 'refused: %', SQLERRM LIKE '%max_ahead_ms%';
END $$;
SELECT uid_fields.last_issued('ids_state') = :before_refusal AS state_unchanged;
SET uid_fields.clock_offset_ms = -5000;
SELECT min(id) > (SELECT max(id) FROM made) AS later_after_step_back
  FROM (SELECT ids(5) AS id FROM generate_series(1, 1000)) back;
RESET uid_fields.clock_offset_ms;

-- The layout's end: refused before any state is written.
CREATE SEQUENCE ended_state AS bigint MINVALUE 0 START 0;
SELECT uid_fields.next_id('ended_state', 1, 0, 1000, 6, 4, 4, 0, 3, 3, 0);
SELECT last_value, is_called FROM ended_state;

-- Read-only transactions (and standbys) are refused on every call.
BEGIN;
SET TRANSACTION READ ONLY;
SELECT ids(5);
ROLLBACK;

-- Reset (check-db --fix) and reload (every install) of the state.
SELECT uid_fields.reset_state('ids_state', 1000);
SELECT uid_fields.last_issued('ids_state') AS last, last_value FROM ids_state;
SELECT setval('ids_state', 2000);
SELECT uid_fields.reload_state('ids_state');
SELECT uid_fields.last_issued('ids_state') AS last;
-- The 20,000 ids above ran up to 20 ms ahead of the clock (1024 per ms): wait it out.
DO $$ BEGIN PERFORM pg_sleep(0.1); END $$;
SELECT ids(5) > (SELECT max(id) FROM made) AS on_time_again;

-- Nobody but the extension's owner and whom it grants may run the functions that read
-- or move a state (issue 37: a role with a login filled the shared table).
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
  FROM pg_proc p WHERE p.pronamespace = 'uid_fields'::regnamespace ORDER BY 1;
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_uidf_reader;  -- left by an interrupted run
DROP ROLE IF EXISTS regress_uidf_stranger;
RESET client_min_messages;
CREATE ROLE regress_uidf_stranger;
SET ROLE regress_uidf_stranger;
CREATE TEMP SEQUENCE strangers_state AS bigint MINVALUE 0 START 0;
SELECT uid_fields.next_id('strangers_state', 1, 1704067200000, 1, 23, 10, 10, 0, 8191,
                          2199023255551, 3600000);
RESET ROLE;
DROP SEQUENCE strangers_state;

-- A temporary state sequence is refused, even to a superuser: its state would outlive it.
CREATE TEMP SEQUENCE temp_state AS bigint MINVALUE 0 START 0;
SELECT uid_fields.next_id('temp_state', 1, 1704067200000, 1, 23, 10, 10, 0, 8191,
                          2199023255551, 3600000);
DROP SEQUENCE temp_state;
-- So is a relation that is not a sequence.
SELECT uid_fields.next_id('pg_class', 1, 1704067200000, 1, 23, 10, 10, 0, 8191,
                          2199023255551, 3600000);

-- Only who may write the state sequence may move its state.
CREATE ROLE regress_uidf_reader;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA uid_fields TO regress_uidf_reader;
GRANT SELECT ON ids_state TO regress_uidf_reader;
GRANT EXECUTE ON FUNCTION ids(integer) TO regress_uidf_reader;
SET ROLE regress_uidf_reader;
SELECT ids(5);
SELECT uid_fields.reset_state('ids_state', 0);
RESET ROLE;

-- A REVOKE takes effect in the next transaction of a session that already made ids.
GRANT UPDATE ON ids_state TO regress_uidf_reader;
SET ROLE regress_uidf_reader;
SELECT ids(5) > 0 AS granted;
RESET ROLE;
REVOKE UPDATE ON ids_state FROM regress_uidf_reader;
SET ROLE regress_uidf_reader;
SELECT ids(5) > 0 AS revoked;
RESET ROLE;

-- The entries of dropped state sequences are used again: far more states made and
-- dropped one after another than the server's table holds (uid_fields.max_states).
DO $$
BEGIN
    FOR i IN 1..current_setting('uid_fields.max_states')::integer + 100 LOOP
        CREATE SEQUENCE churn_state AS bigint MINVALUE 0 START 0;
        PERFORM uid_fields.next_id('churn_state', 1, 1704067200000, 1, 23, 10, 10, 0, 8191,
                                   2199023255551, 3600000);
        DROP SEQUENCE churn_state;
        COMMIT;
    END LOOP;
    RAISE NOTICE 'churned';
END $$;

DROP FUNCTION ids(integer);
DROP SEQUENCE ids_state, ended_state;
DROP EXTENSION uid_fields;

-- An extension created at 1.0 (every function executable by PUBLIC) and updated: PUBLIC
-- loses them, and the owners of the functions that call next_id get them, so an
-- application running as its own role goes on making ids.
CREATE EXTENSION uid_fields VERSION '1.0';
CREATE SEQUENCE ids_state AS bigint MINVALUE 0 START 0;
ALTER SEQUENCE ids_state OWNER TO regress_uidf_reader;
CREATE FUNCTION ids(shard integer) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT uid_fields.next_id('ids_state'::regclass, shard, 1704067200000, 1, 23, 10, 10,
                              0, 8191, 2199023255551, 3600000) $$;
ALTER FUNCTION ids(integer) OWNER TO regress_uidf_reader;
ALTER EXTENSION uid_fields UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'uid_fields';
SELECT p.proname, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may,
       has_function_privilege('regress_uidf_reader', p.oid, 'EXECUTE') AS owner_may,
       has_function_privilege('regress_uidf_stranger', p.oid, 'EXECUTE') AS stranger_may
  FROM pg_proc p WHERE p.pronamespace = 'uid_fields'::regnamespace ORDER BY 1;
SET ROLE regress_uidf_reader;
SELECT ids(5) > 0 AS after_update;
RESET ROLE;
DROP FUNCTION ids(integer);
DROP SEQUENCE ids_state;
DROP EXTENSION uid_fields;
DROP ROLE regress_uidf_reader;
DROP ROLE regress_uidf_stranger;
