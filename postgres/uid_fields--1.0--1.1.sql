-- The uid_fields extension from 1.0 to 1.1 (ALTER EXTENSION uid_fields UPDATE): the
-- functions that read or move a state are no longer executable by PUBLIC (issue 37: any
-- role with a login could fill the server's shared table of states). So that what runs
-- goes on running, the owners of this database's functions that call next_id() (the
-- per-table functions the uid_fields package installed) are granted them; any other role
-- that calls those functions needs a superuser's GRANT EXECUTE ON ALL FUNCTIONS IN
-- SCHEMA uid_fields TO <role>. (Granted here, these are the extension's initial
-- privileges, which pg_dump leaves out: after a restore the package's install, run by a
-- superuser, grants them again, or the superuser does.) The library of 1.1 also refuses
-- temporary and unlogged state sequences, bounds the states of each database
-- (uid_fields.max_states_per_database) and asks for the permission in each transaction.

\echo Use "ALTER EXTENSION uid_fields UPDATE TO '1.1'" to load this file. \quit

REVOKE EXECUTE ON FUNCTION
    next_id(regclass, integer, bigint, bigint, integer, integer, integer, bigint, integer,
            bigint, bigint),
    reset_state(regclass, bigint),
    reload_state(regclass),
    last_issued(regclass)
FROM PUBLIC;

DO $uid_grant$
DECLARE
    caller name;
BEGIN
    FOR caller IN
        SELECT DISTINCT pg_get_userbyid(p.proowner)
          FROM pg_proc p
         WHERE p.prosrc LIKE '%uid_fields.next_id(%'
           AND p.pronamespace <> '@extschema@'::regnamespace
    LOOP
        EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA @extschema@ TO %I', caller);
    END LOOP;
END
$uid_grant$;
