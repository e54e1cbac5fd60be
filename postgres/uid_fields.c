/*
 * uid_fields: next_id() for PostgreSQL in C, an opt-in alternative to the PL/pgSQL
 * function of uid_fields.sql.postgres. Packaged as the extension uid_fields
 * (uid_fields.control, uid_fields--<version>.sql): a superuser runs CREATE EXTENSION once
 * per database, and the application's own role then creates its per-table next_id
 * functions in LANGUAGE sql, calling uid_fields.next_id() (no superuser right needed).
 *
 * Why it exists. The PL/pgSQL function serialises every call on an advisory lock, opens a
 * subtransaction to release the lock on error, and writes its state with setval() on every
 * call; setval gives the calling transaction an xid, so every commit waits for a WAL
 * flush. That costs about half of Instagram's original function's throughput. Here the
 * last issued id lives in shared memory and each call takes it with one compare-and-swap:
 * no lock, no subtransaction, no WAL on the common path.
 *
 * What keeps it correct.
 *  - Uniqueness: ids are issued as GREATEST(last + 1, now_unit << sequence_bits), taken
 *    with compare-and-swap, exactly the PL/pgSQL rule. Above 2^sequence_bits ids per unit
 *    the ids carry into the next unit; a clock that goes back cannot repeat an id.
 *  - Crashes: shared memory is lost on a restart, so no id is ever issued above a
 *    "ceiling" that is first written to the function's state sequence and flushed to the
 *    WAL (XLogFlush, not merely logged: a read-only transaction's id must survive a crash
 *    too). After a restart the state starts at that ceiling, above every id issued before.
 *    The ceiling is moved half a second ahead at a time, under the same advisory lock the
 *    PL/pgSQL function takes, so the two can replace each other on a live database.
 *  - Bad clocks: the same max_ahead_ms refusal and layout-end check as the PL/pgSQL one,
 *    both before any state is written.
 *  - search_path: the state sequence is passed as a regclass the SQL wrapper resolved with
 *    its schema at install time.
 *
 * Who may use it (issue 37). The states share one fixed table of max_states entries with
 * every database of the server, so taking one is guarded: the extension's functions are
 * not executable by PUBLIC (uid_fields--1.1.sql; the installer grants them), the state
 * must be a permanent sequence the caller may UPDATE (a TEMP one's entry would outlive
 * it; an unlogged one loses its ceiling in a crash), each database may hold at most
 * uid_fields.max_states_per_database entries, and when a database or the server is full
 * the entries of dropped sequences (and of dropped databases) are freed and used again.
 * A backend uses an entry only while it holds a RowExclusiveLock on its sequence (taken
 * once per transaction, as nextval() does), so no entry is freed under a backend that
 * uses it. The permission is asked again in each transaction (and after a relcache
 * invalidation of the sequence, which a GRANT or REVOKE sends): a REVOKE takes effect
 * in the next transaction at the latest.
 *
 * Shared memory needs the library in shared_preload_libraries; loading it any other way
 * is refused with a message that says so.
 *
 * Versions. UID_FIELDS_VERSION is the extension's version (uid_fields.control's
 * default_version, the Python package's uid_fields.sql.pg_extension.EXTENSION_VERSION):
 * the library reports it as the read-only setting uid_fields.loaded_version and as
 * uid_fields.version(), and the Python side refuses to install functions against a
 * library or an extension of another version. Built and tested on PostgreSQL 15; the
 * APIs that appeared later than 13 are used under PG_VERSION_NUM guards.
 */
#include "postgres.h"

#include <limits.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "commands/dbcommands.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/acl.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

#define UID_FIELDS_VERSION "1.1"

#define PRELOAD_HINT "Add uid_fields to shared_preload_libraries in postgresql.conf " \
	"(shared_preload_libraries = 'uid_fields') and restart the server."

/* The advisory lock's first key: "uidf" in ASCII, as in uid_fields.sql.postgres. */
#define LOCK_CLASS 0x75696466
/* Milliseconds from the Unix epoch to PostgreSQL's (2000-01-01). */
#define UNIX_TO_PG_EPOCH_MS INT64CONST(946684800000)
/* How far ahead of the issued ids the durable ceiling is moved at a time. */
#define RESERVE_MS 500

typedef struct StateKey
{
	Oid			database;
	Oid			sequence;
} StateKey;

typedef struct StateEntry
{
	StateKey	key;
	/* The last issued value: unit << sequence_bits | sequence. */
	pg_atomic_uint64 last;
	/* No value above this is issued: it is in the sequence and flushed to the WAL. */
	pg_atomic_uint64 ceiling;
	/* last and ceiling were loaded from the sequence since the server started. */
	pg_atomic_uint32 loaded;
} StateEntry;

/*
 * What this backend looked up in the current transaction, which holds a RowExclusiveLock
 * on each sequence here: emptied at the end of every transaction, of an aborted
 * subtransaction (whose locks are gone) and by a relcache invalidation of the sequence.
 */
typedef struct CachedState
{
	Oid			sequence;
	Oid			user;			/* who was allowed to move it */
	StateEntry *entry;
} CachedState;

static int	max_states = 1024;
static int	max_states_per_database = 0;	/* 0: a quarter of max_states */
static int	clock_offset_ms = 0;
static char *loaded_version = NULL;

static HTAB *states = NULL;
static LWLock *states_lock = NULL;
static CachedState cache[16];
static int	cached = 0;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);
static void forget_states(XactEvent event, void *arg);
static void forget_subxact_states(SubXactEvent event, SubTransactionId sub,
								  SubTransactionId parent, void *arg);
static void forget_relation(Datum arg, Oid relid);

PG_FUNCTION_INFO_V1(uid_fields_next_id);
PG_FUNCTION_INFO_V1(uid_fields_reset_state);
PG_FUNCTION_INFO_V1(uid_fields_reload_state);
PG_FUNCTION_INFO_V1(uid_fields_last_issued);
PG_FUNCTION_INFO_V1(uid_fields_version);

/*
 * What the library needs from shared memory: from the shmem_request_hook since
 * PostgreSQL 15, directly from _PG_init before.
 */
static void
request_shmem(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif
	RequestAddinShmemSpace(hash_estimate_size(max_states, sizeof(StateEntry)));
	RequestNamedLWLockTranche("uid_fields", 1);
}

static void
startup_shmem(void)
{
	HASHCTL		info;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StateKey);
	info.entrysize = sizeof(StateEntry);
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	states = ShmemInitHash("uid_fields id states", max_states, max_states, &info,
						   HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
	states_lock = &(GetNamedLWLockTranche("uid_fields"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the uid_fields library must be loaded by shared_preload_libraries"),
				 errhint(PRELOAD_HINT)));
	DefineCustomIntVariable("uid_fields.max_states",
							"How many next_id() state sequences the server can serve.",
							NULL, &max_states, 1024, 16, 1000000, PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("uid_fields.max_states_per_database",
							"How many of the next_id() states one database can hold.",
							"0: a quarter of uid_fields.max_states.",
							&max_states_per_database, 0, 0, 1000000, PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("uid_fields.clock_offset_ms",
							"Added to the clock next_id() reads (to test clock faults).",
							NULL, &clock_offset_ms, 0, INT_MIN, INT_MAX, PGC_SUSET,
							GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("uid_fields.loaded_version",
							   "The version of the loaded uid_fields library.",
							   NULL, &loaded_version, UID_FIELDS_VERSION, PGC_INTERNAL,
							   GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE,
							   NULL, NULL, NULL);
#if PG_VERSION_NUM >= 150000
	MarkGUCPrefixReserved("uid_fields");
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = request_shmem;
#else
	EmitWarningsOnPlaceholders("uid_fields");
	request_shmem();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = startup_shmem;
	RegisterXactCallback(forget_states, NULL);
	RegisterSubXactCallback(forget_subxact_states, NULL);
	CacheRegisterRelcacheCallback(forget_relation, (Datum) 0);
}

/* The end of a transaction: its locks are gone, and the permissions are asked again. */
static void
forget_states(XactEvent event, void *arg)
{
	cached = 0;
}

static void
forget_subxact_states(SubXactEvent event, SubTransactionId sub, SubTransactionId parent,
					  void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		cached = 0;				/* the locks it took are released */
}

/* A relcache invalidation (a GRANT, a REVOKE, an ALTER, a DROP of the sequence). */
static void
forget_relation(Datum arg, Oid relid)
{
	int			kept = 0;

	for (int i = 0; i < cached; i++)
		if (OidIsValid(relid) && cache[i].sequence != relid)
			cache[kept++] = cache[i];
	cached = kept;
}

static int64
floor_div(int64 a, int64 b)
{
	int64		q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64
unix_ms(TimestampTz at)
{
	return floor_div(at, 1000) + UNIX_TO_PG_EPOCH_MS;
}

static int
database_limit(void)
{
	if (max_states_per_database > 0)
		return Min(max_states_per_database, max_states);
	return Max(max_states / 4, 1);
}

/* Under states_lock: how many entries this database holds. */
static int
database_states(void)
{
	HASH_SEQ_STATUS scan;
	StateEntry *entry;
	int			count = 0;

	hash_seq_init(&scan, states);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (entry->key.database == MyDatabaseId)
			count++;
	return count;
}

static bool
remove_state(StateKey *key)
{
	bool		removed;

	LWLockAcquire(states_lock, LW_EXCLUSIVE);
	removed = hash_search(states, key, HASH_REMOVE, NULL) != NULL;
	LWLockRelease(states_lock);
	return removed;
}

/*
 * Free the entries of this database's dropped sequences and of dropped databases (the
 * only ones a backend can tell are gone: another database's catalog is not readable
 * here); whether any was freed. An entry is freed only under a ShareLock on its
 * sequence's OID, which conflicts with the RowExclusiveLock of every backend using it.
 */
static bool
reclaim_states(void)
{
	HASH_SEQ_STATUS scan;
	StateEntry *entry;
	StateKey   *keys = palloc(sizeof(StateKey) * max_states);
	int			count = 0;
	bool		freed = false;

	LWLockAcquire(states_lock, LW_SHARED);
	hash_seq_init(&scan, states);
	while ((entry = hash_seq_search(&scan)) != NULL)
		if (count < max_states)
			keys[count++] = entry->key;
	LWLockRelease(states_lock);
	for (int i = 0; i < count; i++)
	{
		StateKey   *key = &keys[i];

		if (key->database == MyDatabaseId)
		{
			/*
			 * Not on a standby, which takes no lock stronger than RowExclusiveLock (its
			 * backends use AccessShareLock, and only check-db's last_issued() runs
			 * there): its dropped sequences' entries stay until a restart.
			 */
			if (RecoveryInProgress() ||
				!ConditionalLockRelationOid(key->sequence, ShareLock))
				continue;		/* in use, so it exists */
			if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(key->sequence)))
				freed |= remove_state(key);
			UnlockRelationOid(key->sequence, ShareLock);
		}
		else if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(key->database)))
			freed |= remove_state(key);
	}
	pfree(keys);
	return freed;
}

/* The entry of ``sequence`` in this database, made if there is none. */
static StateEntry *
enter_state(Oid sequence)
{
	StateKey	key;
	StateEntry *entry;
	bool		found;

	memset(&key, 0, sizeof(key));
	key.database = MyDatabaseId;
	key.sequence = sequence;
	LWLockAcquire(states_lock, LW_SHARED);
	entry = hash_search(states, &key, HASH_FIND, NULL);
	LWLockRelease(states_lock);
	if (entry != NULL)
		return entry;
	for (int attempt = 0;; attempt++)
	{
		bool		database_full = false;

		LWLockAcquire(states_lock, LW_EXCLUSIVE);
		entry = hash_search(states, &key, HASH_FIND, NULL);
		if (entry == NULL)
		{
			if (database_states() >= database_limit())
				database_full = true;
			else
			{
				entry = hash_search(states, &key, HASH_ENTER_NULL, &found);
				if (entry != NULL && !found)
				{
					pg_atomic_init_u64(&entry->last, 0);
					pg_atomic_init_u64(&entry->ceiling, 0);
					pg_atomic_init_u32(&entry->loaded, 0);
				}
			}
		}
		LWLockRelease(states_lock);
		if (entry != NULL)
			return entry;
		if (attempt == 0 && reclaim_states())
			continue;
		if (database_full)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("uid_fields: database \"%s\" holds its %d next_id() states "
							"(uid_fields.max_states_per_database)",
							get_database_name(MyDatabaseId), database_limit()),
					 errhint("Drop the state sequences no longer used (their states are "
							 "then reused), or raise uid_fields.max_states_per_database "
							 "(and uid_fields.max_states).")));
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("uid_fields: no room for another next_id() state "
						"(uid_fields.max_states = %d)", max_states),
				 errhint("Raise uid_fields.max_states and restart the server.")));
	}
}

static StateEntry *
find_state(Oid sequence)
{
	StateEntry *entry;
	HeapTuple	tuple;
	Form_pg_class form;
	Oid			user = GetUserId();

	for (int i = 0; i < cached; i++)
		if (cache[i].sequence == sequence && cache[i].user == user)
			return cache[i].entry;
	/*
	 * Held to the end of the transaction, as nextval() holds it: the sequence is not
	 * dropped, nor its entry freed, while this backend uses it. Taking it also reads the
	 * invalidations sent so far (a REVOKE's). A standby allows no RowExclusiveLock; there
	 * nothing but the replay drops a sequence, which AccessShareLock holds off too.
	 */
	LockRelationOid(sequence, RecoveryInProgress() ? AccessShareLock : RowExclusiveLock);
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(sequence));
	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("uid_fields: the state sequence of OID %u does not exist",
						sequence)));
	form = (Form_pg_class) GETSTRUCT(tuple);
	if (form->relkind != RELKIND_SEQUENCE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("uid_fields: \"%s\" is not a sequence", NameStr(form->relname))));
	if (form->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("uid_fields: the state sequence \"%s\" is %s", NameStr(form->relname),
						form->relpersistence == RELPERSISTENCE_TEMP ? "temporary" : "unlogged"),
				 errhint("A state lives in the server's shared memory, and its ceiling must "
						 "survive a crash: use a permanent, logged sequence.")));
	ReleaseSysCache(tuple);
	/*
	 * Whoever may write the state sequence may move its state: the functions are
	 * executable by whom the installer granted them, the sequence by its owner.
	 */
	if (pg_class_aclcheck(sequence, user, ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("uid_fields: permission denied for the state sequence \"%s\"",
						get_rel_name(sequence)),
				 errhint("next_id() needs UPDATE on its state sequence.")));
	entry = enter_state(sequence);
	if (cached < (int) lengthof(cache))
	{
		cache[cached].sequence = sequence;
		cache[cached].user = user;
		cache[cached].entry = entry;
		cached++;
	}
	return entry;
}

/* The sequence's last_value (0 before its first value). */
static uint64
durable_value(Oid sequence)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		value;

	InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = ObjectIdGetDatum(sequence);
	fcinfo->args[0].isnull = false;
	value = pg_sequence_last_value(fcinfo);
	return fcinfo->isnull ? 0 : (uint64) DatumGetInt64(value);
}

/* Write ``value`` to the sequence and flush it, so it survives a crash. */
static void
write_durable(Oid sequence, uint64 value)
{
	DirectFunctionCall3(setval3_oid, ObjectIdGetDatum(sequence),
						Int64GetDatum((int64) value), BoolGetDatum(true));
	XLogFlush(XactLastRecEnd);
}

static void
raise_to(pg_atomic_uint64 *target, uint64 value)
{
	uint64		seen = pg_atomic_read_u64(target);

	while (seen < value && !pg_atomic_compare_exchange_u64(target, &seen, value))
		;
}

static void
advisory_tag(LOCKTAG *tag, Oid sequence)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) LOCK_CLASS, (uint32) sequence, 2);
}

/*
 * Under the advisory lock: load the state after a restart, follow a sequence someone
 * else moved forward (the PL/pgSQL function on the same database), and move the ceiling
 * to ``needed`` + the reserve. ``wait``: false only tops up early, and gives way to a
 * session already doing it.
 */
static void
advance_ceiling(StateEntry *entry, Oid sequence, uint64 needed, uint64 reserve, bool wait)
{
	LOCKTAG		tag;

	advisory_tag(&tag, sequence);
	if (LockAcquire(&tag, ExclusiveLock, true, !wait) == LOCKACQUIRE_NOT_AVAIL)
		return;
	PG_TRY();
	{
		uint64		durable = durable_value(sequence);

		if (!pg_atomic_read_u32(&entry->loaded))
		{
			pg_atomic_write_u64(&entry->last, durable);
			pg_atomic_write_u64(&entry->ceiling, durable);
			pg_write_barrier();
			pg_atomic_write_u32(&entry->loaded, 1);
		}
		else if (durable > pg_atomic_read_u64(&entry->ceiling))
			raise_to(&entry->last, durable);
		if (needed > 0 && needed + reserve / 2 > pg_atomic_read_u64(&entry->ceiling))
		{
			uint64		ceiling = Max(needed, durable) + reserve;

			write_durable(sequence, ceiling);
			pg_write_barrier();
			pg_atomic_write_u64(&entry->ceiling, ceiling);
		}
	}
	PG_FINALLY();
	{
		LockRelease(&tag, ExclusiveLock, true);
	}
	PG_END_TRY();
}

static void
require_preload(void)
{
	if (states == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the uid_fields library must be loaded by shared_preload_libraries"),
				 errhint(PRELOAD_HINT)));
}

Datum
uid_fields_next_id(PG_FUNCTION_ARGS)
{
	Oid			sequence = PG_GETARG_OID(0);
	int32		shard = PG_GETARG_INT32(1);
	int64		epoch_ms = PG_GETARG_INT64(2);
	int64		unit_ms = PG_GETARG_INT64(3);
	int32		time_shift = PG_GETARG_INT32(4);
	int32		shard_shift = PG_GETARG_INT32(5);
	int32		sequence_bits = PG_GETARG_INT32(6);
	int64		node_bits = PG_GETARG_INT64(7);
	int32		shard_max = PG_GETARG_INT32(8);
	int64		max_unit = PG_GETARG_INT64(9);
	int64		max_ahead_ms = PG_GETARG_INT64(10);	/* 0: never refuse */
	int64		now_ms,
				now_unit,
				ahead_units;
	uint64		reserve,
				issued;
	StateEntry *entry;

	require_preload();
	if (shard < 0 || shard > shard_max)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("shard %d is out of range 0..%d", shard, shard_max)));
	if (unit_ms < 1 || sequence_bits < 0 || sequence_bits > 62 || time_shift < 0 ||
		time_shift > 63 || shard_shift < 0 || shard_shift > 63)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("uid_fields: invalid layout arguments")));

	/*
	 * Moving the ceiling writes the sequence, which a read-only transaction or a standby
	 * cannot: refuse every call there, as the PL/pgSQL function's setval does, rather
	 * than only the calls that happen to need a new ceiling.
	 */
	PreventCommandIfReadOnly("uid_fields next_id()");
	PreventCommandDuringRecovery("uid_fields next_id()");

	now_ms = unix_ms(GetCurrentTimestamp()) + clock_offset_ms;
	now_unit = Max(floor_div(now_ms - epoch_ms, unit_ms), 0);
	reserve = (uint64) Max(RESERVE_MS / unit_ms, 1) << sequence_bits;
	ahead_units = max_ahead_ms > 0 ? (max_ahead_ms + unit_ms - 1) / unit_ms : 0;
	entry = find_state(sequence);
	if (!pg_atomic_read_u32(&entry->loaded))
		advance_ceiling(entry, sequence, 0, reserve, true);
	pg_read_barrier();

	for (;;)
	{
		uint64		last = pg_atomic_read_u64(&entry->last);
		uint64		ceiling;

		pg_read_barrier();
		ceiling = pg_atomic_read_u64(&entry->ceiling);
		issued = Max(last + 1, (uint64) now_unit << sequence_bits);
		if (max_ahead_ms > 0 && now_unit - (int64) (last >> sequence_bits) > ahead_units &&
			now_ms - unix_ms(GetCurrentStatementStartTimestamp()) > max_ahead_ms)
			/* one wild reading must not stamp every later id ahead of real time */
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_FIELD_OVERFLOW),
					 errmsg("uid_fields: clock reading %s is more than " INT64_FORMAT
							" ms ahead of the last issued id and of the statement's "
							"start; refused (max_ahead_ms)",
							timestamptz_to_str((now_ms - UNIX_TO_PG_EPOCH_MS) * 1000),
							max_ahead_ms)));
		if ((int64) (issued >> sequence_bits) > max_unit)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("uid_fields: layout exhausted at %s",
							timestamptz_to_str((epoch_ms + (max_unit + 1) * unit_ms -
												UNIX_TO_PG_EPOCH_MS) * 1000))));
		if (issued > ceiling)
		{
			advance_ceiling(entry, sequence, issued, reserve, true);
			continue;
		}
		if (pg_atomic_compare_exchange_u64(&entry->last, &last, issued))
		{
			/* top up before anyone has to wait for the flush */
			if (issued + reserve / 2 > ceiling)
				advance_ceiling(entry, sequence, issued, reserve, false);
			break;
		}
	}
	PG_RETURN_INT64((int64) (((issued >> sequence_bits) << time_shift)
							 | ((uint64) shard << shard_shift)
							 | (uint64) node_bits
							 | (issued & ((UINT64CONST(1) << sequence_bits) - 1))));
}

/*
 * Under the advisory lock: the last issued value and the ceiling both set to ``value``
 * (written to the sequence first when ``write``), as after a restart.
 */
static void
set_state(Oid sequence, bool write, uint64 value)
{
	StateEntry *entry = find_state(sequence);
	LOCKTAG		tag;

	advisory_tag(&tag, sequence);
	LockAcquire(&tag, ExclusiveLock, true, false);
	PG_TRY();
	{
		if (write)
			write_durable(sequence, value);
		else
			value = durable_value(sequence);
		pg_atomic_write_u64(&entry->ceiling, value);
		pg_write_barrier();
		pg_atomic_write_u64(&entry->last, value);
		pg_write_barrier();
		pg_atomic_write_u32(&entry->loaded, 1);
	}
	PG_FINALLY();
	{
		LockRelease(&tag, ExclusiveLock, true);
	}
	PG_END_TRY();
}

/*
 * Bring the state back to ``value`` (check-db --fix, after a clock that ran ahead): the
 * sequence, the ceiling and the last issued value, under the advisory lock.
 */
Datum
uid_fields_reset_state(PG_FUNCTION_ARGS)
{
	require_preload();
	set_state(PG_GETARG_OID(0), true, (uint64) PG_GETARG_INT64(1));
	PG_RETURN_VOID();
}

/*
 * Start again from the sequence, as after a restart; run by every install of the
 * function. While the PL/pgSQL function made the ids, the sequence may have been set
 * back (its own state reset), and the values this server's memory still holds below
 * the old ceiling may since have been issued by it. The ceiling is set to the sequence,
 * so the next call takes the lock and reads it before issuing anything.
 */
Datum
uid_fields_reload_state(PG_FUNCTION_ARGS)
{
	require_preload();
	set_state(PG_GETARG_OID(0), false, 0);
	PG_RETURN_VOID();
}

/* The last issued value in this server's memory (NULL before the first call since the
 * server started): how far the state runs ahead, where the sequence holds a ceiling. */
Datum
uid_fields_last_issued(PG_FUNCTION_ARGS)
{
	StateEntry *entry;

	require_preload();
	entry = find_state(PG_GETARG_OID(0));
	if (!pg_atomic_read_u32(&entry->loaded))
		PG_RETURN_NULL();
	pg_read_barrier();
	PG_RETURN_INT64((int64) pg_atomic_read_u64(&entry->last));
}

/* The library's version (the extension's version it was built for). */
Datum
uid_fields_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(UID_FIELDS_VERSION));
}
