"""Moving logical shards between PostgreSQL databases with logical replication.

Instagram moved its logical shards with PostgreSQL replication, Citus moves shards with
logical replication; ``LogicalMove`` does the same for a range of logical shards. The
portable ``ShardMove`` (``uid_fields.ops.moves``) copies in batches and catches up by
the ids' time; replication instead carries every change of the range (inserts, updates,
deletes) in commit order, so nothing written during the copy can be missed:

1. **Check** the source: ``wal_level = logical``, free replication slots and WAL
   senders, PostgreSQL 15 or later; the target's user must be a superuser (PostgreSQL
   15 creates subscriptions for superusers only). Refused with the fix otherwise.
2. **Replica identity.** A row filter on UPDATE and DELETE can only read columns of the
   table's replica identity; a table routed by its own primary key has it, a child
   routed by its parent's id does not: such a table is set to ``REPLICA IDENTITY FULL``
   for the move (its former identity is kept in the state file and restored at the
   end). Without it the source would refuse the application's updates.
3. **Publication** on the source, one table per moved table, each filtered by the
   range's predicate (``logical_range_sql``, the audit's predicate); truncates are not
   published (a TRUNCATE ignores row filters).
4. **Replication slot** on the source and **subscription** on the target (``copy_data``:
   the rows already there, then streaming). Every object is named ``move_name(...)``,
   so a rerun finds them and resumes where the server left off: the copy and the
   streaming run in the servers, not in this process, and survive its death.
5. **Wait** until every table is copied (``pg_subscription_rel`` state ``r``) and the
   target has caught up (the slot's ``confirmed_flush_lsn`` against the source's
   ``pg_current_wal_lsn()``), showing rows copied and the lag.
6. **Switch**: the move's write fence closes the range on the source (triggers; a
   refused write raises the retryable ``ShardMoveFencedError``), the source's WAL
   position is taken after it, and once the target has confirmed that position every
   logical shard is compared (row count and a digest of the rows' contents) while
   nothing can change. Then the subscription, the slot and the publication are dropped
   and the state records the switch. From then on the mover writes nothing to the
   target: the operator deploys the new map, and ``cleanup()`` deletes the source's
   rows of the range (all of them: the switch proved the target had each one, so a
   row missing there now was deleted by the application since) and removes the fence.

``abort()`` undoes a move that has not switched: subscription, slots, publication, the
replica identities, the target's copies of the range and the fence; it first fences the
source, lets the target catch up and refuses when the target holds writes the source
lacks (the new map deployed early: ``move_recovery``), unless told to copy them back.
A switch under the new map (that early deploy, then deployed everywhere) switches
forward: the target's own writes are kept, and it gets every write the source took. ``unfence()``
calls a switch off before the deploy. A run stopped anywhere (even ``kill -9``) is
resumed by the next one: what it created is found by name, and a switch that had
compared equal is finished rather than started again.

The mechanism is ORM-free: each database is a ``PgDatabase`` (a function that runs one
SQL statement in autocommit and returns its rows, and the libpq connection string the
*target's server* uses to reach the source); the adapters build them from Django's
``DATABASES`` and SQLAlchemy's engine URLs.

Ids made by the application need no sequence sync. Ids made by the database
(``next_id`` functions of ``uid_fields.sql``) carry the database's own shard field and
per-database sequence: the rows copied keep their ids, and the target's own
``next_id`` makes new ids with its own shard number, as after any move.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..sql import replication as sql
from . import move_recovery
from .move_recovery import early_deploy, refusal, target_writes
from .move_reports import CleanupReport
from .moves import ShardMove
from .replication_parts import (
    Fence,
    PgDatabase,
    PgTable,
    ReplicationError,
    ReplicationProgress,
    ReplicationState,
    ReplicationUnavailable,
    Run,
    logical_refusal,
    pg_tables,
    pooled_refusal,
)

__all__ = [
    "Fence",
    "LogicalMove",
    "PgDatabase",
    "PgTable",
    "ReplicationError",
    "ReplicationProgress",
    "ReplicationUnavailable",
    "Run",
    "logical_refusal",
    "pg_tables",
]

log = logging.getLogger("uid_fields.moves")

#: A wait gives up after the subscription's workers failed this often (they retry
#: every ``wal_retrieve_retry_interval``, 5 s by default).
MAX_WORKER_ERRORS = 5

#: The source's row count (the total of the progress) is counted again this often (s).
TOTAL_EVERY_S = 30.0


class LogicalMove:
    """Move ``tables`` (parents first) from ``source`` to ``target`` by replication.

    ``move`` is the portable ``ShardMove`` of the same range: it has checked the maps
    (who owns the range) and does the cleanup after the deploy. ``name`` names every
    object the move creates (``sql.move_name``); ``state`` is its JSON file (None: kept
    in memory only). ``fence`` closes the range on the source at the switch.
    """

    def __init__(
        self,
        move: ShardMove,
        tables: Sequence[PgTable],
        *,
        source: PgDatabase,
        target: PgDatabase,
        name: str,
        fence: Fence,
        state: str | Path | None = None,
        poll_s: float = 0.2,
        timeout_s: float | None = None,
        on_progress: Callable[[ReplicationProgress], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if len(name.encode()) > sql.MAX_IDENTIFIER:
            raise ValueError(f"{name!r} is longer than {sql.MAX_IDENTIFIER} bytes")
        self.move, self.tables = move, list(tables)
        self.source, self.target, self.name, self.fence = source, target, name, fence
        self.state = ReplicationState(None if state is None else Path(state), name)
        self.poll_s, self.timeout_s = poll_s, timeout_s
        self.on_progress, self.clock = on_progress, clock
        self._total: tuple[float, int] | None = None  # (when, source rows of the range)
        self._quoted = sql.quote_ident(name)
        self._literal = sql.quote_literal(name)

    def __repr__(self) -> str:
        return f"<LogicalMove {self.name}: {self.source.name} -> {self.target.name}>"

    @property
    def switched(self) -> bool:
        return self.state.switched

    # -- checks --------------------------------------------------------------------------
    def check(self) -> None:
        """Refuse (``ReplicationUnavailable``, with the fix) when the servers cannot run
        this move: a source without ``wal_level = logical``, without a free slot or WAL
        sender, older than PostgreSQL 15 (row filters); a target user that is not a
        superuser (PostgreSQL 15 creates subscriptions for superusers only)."""
        reason = logical_refusal(self.tables) or next(
            filter(None, (pooled_refusal(side) for side in (self.source, self.target))), None
        )
        if reason:
            raise ReplicationUnavailable(reason)
        found = self.source.one(
            "SELECT current_setting('wal_level'), current_setting('server_version_num')::int, "
            "current_setting('max_replication_slots')::int - (SELECT count(*) FROM "
            "pg_replication_slots), current_setting('max_wal_senders')::int - (SELECT "
            f"count(*) FROM pg_stat_replication), EXISTS (SELECT FROM pg_replication_slots "
            f"WHERE slot_name = {self._literal})"
        )
        assert found is not None
        wal_level, version, free_slots, free_senders, ours = found
        source = self.source.name
        if wal_level != "logical":
            raise ReplicationUnavailable(
                f"{source} has wal_level = {wal_level}; a move by logical replication needs "
                f"wal_level = logical: run ALTER SYSTEM SET wal_level = logical on {source} "
                "and restart its server (or move with --method portable)"
            )
        if version < 150000:
            raise ReplicationUnavailable(
                f"{source} runs PostgreSQL {version // 10000}; publications with row filters "
                "need PostgreSQL 15 or later (or move with --method portable)"
            )
        # the subscription's slot, and one per table while its initial copy runs
        if not ours and free_slots < 2:
            raise ReplicationUnavailable(
                f"{source} has {free_slots} free replication slots (max_replication_slots); "
                "the move needs 2: raise max_replication_slots (ALTER SYSTEM SET "
                "max_replication_slots = ...; restart) or drop unused slots"
            )
        if not ours and free_senders < 2:
            raise ReplicationUnavailable(
                f"{source} has {free_senders} free WAL senders (max_wal_senders); the move "
                "needs 2: raise max_wal_senders (ALTER SYSTEM SET max_wal_senders = ...; "
                "restart)"
            )
        superuser = self.target.one(
            "SELECT rolsuper OR CASE WHEN current_setting('server_version_num')::int >= "
            "160000 THEN pg_has_role(current_user, 'pg_create_subscription', 'MEMBER') "
            "ELSE false END FROM pg_roles WHERE rolname = current_user"
        )
        if not (superuser and superuser[0]):
            raise ReplicationUnavailable(
                f"the user of {self.target.name} is not a superuser: PostgreSQL 15 creates "
                "subscriptions for superusers only (16 and later also for members of "
                "pg_create_subscription); move as a superuser on the target (or with "
                "--method portable)"
            )

    # -- start (idempotent) --------------------------------------------------------------
    def start(self) -> None:
        """Create what is missing of identity, publication, slot and subscription (a
        rerun after a stop only finds them and goes on)."""
        if self.state.switched:
            return
        for database in (self.source, self.target):
            for setting in sql.SESSION_SETTINGS:
                database.run(setting)
        self._set_identities()
        if not self.source.one(f"SELECT 1 FROM pg_publication WHERE pubname = {self._literal}"):
            filtered = [(t.table_sql, t.where) for t in self.tables]
            self.source.run(sql.create_publication_sql(self.name, filtered))
            log.info("%r: publication created on %s", self, self.source.name)
        if not self.source.one(
            f"SELECT 1 FROM pg_replication_slots WHERE slot_name = {self._literal}"
        ):
            self.source.run(
                f"SELECT pg_create_logical_replication_slot({self._literal}, 'pgoutput')"
            )
        if self._subscription() is None:
            # Rows of the range on the target are copies a stopped attempt left (the map
            # gives the range to the source): the initial copy would collide with them.
            self._delete_target_copies()
            self.target.run(sql.create_subscription_sql(self.name, self.source.conninfo))
            log.info("%r: subscription created on %s", self, self.target.name)
        else:
            self.target.run(f"ALTER SUBSCRIPTION {self._quoted} ENABLE")

    def _set_identities(self) -> None:
        for table in self.tables:
            literal = sql.quote_literal(table.table_sql)
            columns = {
                r[0] for r in self.source.run(sql.IDENTITY_COLUMNS_SQL.format(table=literal))
            }
            found = self.source.one(sql.IDENTITY_SQL.format(table=literal))
            assert found is not None
            if found[0] == "f" or table.route_column in columns:
                continue  # FULL already, or the identity holds the routing column
            if table.name not in self.state.identities:
                self.state.identities[table.name] = [str(found[0]), found[1]]
                self.state.save()  # before the change: a kill after it still restores
            self.source.run(f"ALTER TABLE {table.table_sql} REPLICA IDENTITY FULL")
            log.info("%r: %s set to REPLICA IDENTITY FULL for the move", self, table.label)

    def _restore_identities(self) -> None:
        for name, (kind, index) in list(self.state.identities.items()):
            identity = {"d": "DEFAULT", "n": "NOTHING", "f": "FULL"}.get(str(kind))
            if identity is None:
                identity = f"USING INDEX {sql.quote_ident(str(index).split('.')[-1])}"
            self.source.run(f"ALTER TABLE {sql.quote_ident(name)} REPLICA IDENTITY {identity}")
            del self.state.identities[name]
            self.state.save()

    def _subscription(self) -> int | None:
        found = self.target.one(
            f"SELECT oid FROM pg_subscription WHERE subname = {self._literal} AND subdbid = "
            "(SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return None if found is None else int(found[0])

    def _delete_target_copies(self) -> None:
        if self.move.deployed:
            raise ReplicationError(
                f"the map gives the range to {self.target.name} already: nothing to copy"
            )
        for table in reversed(self.tables):
            # a look first: a DELETE would wait for every lock on the table, even for nothing
            if self.target.run(f"SELECT 1 FROM {table.table_sql} WHERE {table.where} LIMIT 1"):
                self.target.run(f"DELETE FROM {table.table_sql} WHERE {table.where}")

    # -- waiting -------------------------------------------------------------------------
    def _states(self) -> dict[str, str]:
        rows = self.target.run(
            "SELECT r.srrelid::regclass::text, r.srsubstate FROM pg_subscription_rel r "
            "JOIN pg_subscription s ON s.oid = r.srsubid WHERE s.subname = "
            f"{self._literal}"
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def _lag(self, upto: str | None = None) -> tuple[bool, int | None]:
        """Whether the slot confirmed ``upto`` (default: now), and the lag in bytes."""
        position = "pg_current_wal_lsn()" if upto is None else f"{sql.quote_literal(upto)}::pg_lsn"
        found = self.source.one(
            f"SELECT confirmed_flush_lsn >= {position}, "
            f"pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
            f"FROM pg_replication_slots WHERE slot_name = {self._literal}"
        )
        if found is None or found[0] is None:
            return False, None
        return bool(found[0]), int(found[1])

    def progress(self, phase: str, began: float) -> ReplicationProgress:
        """Rows copied (committed, and the COPY running now) against the source's rows."""
        states = self._states()
        copying: dict[str, int] = dict(
            self.target.run(
                "SELECT relid::regclass::text, tuples_processed FROM pg_stat_progress_copy"
            )
        )
        copied = 0
        now = self.clock()
        if self._total is None or now - self._total[0] > TOTAL_EVERY_S:
            self._total = (now, sum(self._count(self.source, t) for t in self.tables))
        total = self._total[1]
        for table in self.tables:
            if states.get(table.table_sql, states.get(table.name)) in ("r", "s", "f"):
                copied += self._count(self.target, table)
            else:
                copied += int(copying.get(table.table_sql, copying.get(table.name, 0)))
        ready = sum(1 for s in states.values() if s == "r")
        _, lag = self._lag()
        return ReplicationProgress(
            phase, ready, len(self.tables), copied, total, lag, self.clock() - began
        )

    @staticmethod
    def _count(database: PgDatabase, table: PgTable) -> int:
        found = database.one(f"SELECT count(*) FROM {table.table_sql} WHERE {table.where}")
        return int(found[0]) if found else 0

    def _errors(self) -> int:
        """How often the subscription's workers failed (a table missing on the target,
        a row that collides, the source out of reach): their messages are in the
        target's server log."""
        found = self.target.one(
            "SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats "
            f"WHERE subname = {self._literal}"
        )
        return int(found[0]) if found else 0

    def _wait(self, phase: str, done: Callable[[], bool]) -> None:
        began = last = self.clock()
        errors = self._errors()
        while not done():
            now = self.clock()
            if self.timeout_s is not None and now - began > self.timeout_s:
                raise ReplicationError(
                    f"{self!r}: {phase} did not finish within {self.timeout_s:.0f} s "
                    f"({self.progress(phase, began)}); see {self.target.name}'s server log"
                )
            failed = self._errors() - errors
            if failed >= MAX_WORKER_ERRORS:
                raise ReplicationError(
                    f"{self!r}: the subscription's workers on {self.target.name} failed "
                    f"{failed} times during the {phase} (a table missing or different on "
                    f"the target?); see {self.target.name}'s server log. Replication is "
                    "left as it is: fix the cause and run again, or --abort"
                )
            if self.on_progress is not None and now - last >= 1.0:
                self.on_progress(self.progress(phase, began))
                last = now
            time.sleep(self.poll_s)
        if self.on_progress is not None:
            self.on_progress(self.progress(phase, began))

    def wait_copied(self) -> None:
        """Until every table's initial copy is done and streams (state ``r``)."""
        expected = len(self.tables)

        def copied() -> bool:
            states = self._states()
            return len(states) == expected and set(states.values()) == {"r"}

        self._wait("copy", copied)

    def wait_caught_up(self, upto: str | None = None) -> str:
        """Until the target has confirmed the source's WAL up to ``upto`` (default: the
        position now); returns that position."""
        if upto is None:
            found = self.source.one("SELECT pg_current_wal_lsn()::text")
            assert found is not None
            upto = str(found[0])
        position = upto
        self._wait("catch-up", lambda: self._lag(position)[0])
        return position

    # -- verify --------------------------------------------------------------------------
    def compare(self) -> dict[str, list[int]]:
        """Per table, the logical shards whose row count or content digest differ
        between the source and the target (empty lists: equal)."""
        differing: dict[str, list[int]] = {}
        for table in self.tables:
            literal = sql.quote_literal(table.table_sql)
            columns = [
                sql.quote_ident(r[0])
                for r in self.source.run(sql.COLUMNS_SQL.format(table=literal))
            ]
            key = self._key(table)
            query = sql.checksum_sql(table.table_sql, table.logical, table.where, key, columns)
            sides = [
                {int(r[0]): (int(r[1]), r[2]) for r in db.run(query)}
                for db in (self.source, self.target)
            ]
            shards = sides[0].keys() | sides[1].keys()
            differing[table.label] = sorted(n for n in shards if sides[0].get(n) != sides[1].get(n))
        return differing

    # -- switch --------------------------------------------------------------------------
    def switch(self) -> None:
        """Fence the range, let the target confirm the source's last write, compare
        while nothing can change, then drop the replication objects. Afterwards the
        mover never writes to the target again."""
        if self.state.switched:
            return
        states = self._states() if self._subscription() is not None else {}
        if self._subscription() is not None and set(states.values()) != {"r"}:
            raise ReplicationError(f"{self!r}: the initial copy is not done; wait for it first")
        if self._subscription() is None and self.state.switch_lsn is None:
            raise ReplicationError(f"{self!r}: no subscription on {self.target.name}: start first")
        self.state.fenced = True
        self.state.save()  # before: a kill during install still finds (and removes) it
        self.fence.install()
        if self.state.switch_lsn is None:
            found = self.source.one("SELECT pg_current_wal_lsn()::text")
            assert found is not None
            lsn = str(found[0])
        else:
            lsn = self.state.switch_lsn
        if self._subscription() is not None:
            self.wait_caught_up(lsn)
        differing = {label: n for label, n in self.compare().items() if n}
        if differing and self.move.deployed:
            # Switching forward after an early deploy: the target owns the range and
            # took writes of its own; it has also confirmed every write of the source
            # (fenced), so its rows are the range's. Said, then kept.
            kept = [str(w) for w in target_writes(self.move) if w.written or w.only_on_source]
            log.warning(
                "%r: switching forward under the new map; the target's own writes are kept (%s)",
                self,
                "; ".join(kept) or "differing logical shards " + str(differing),
            )
            differing = {}
        if differing:
            self.fence.remove()
            self.state.fenced = False
            self.state.save()
            raise ReplicationError(
                f"{self!r}: after catching up, the target differs in logical shards "
                f"{differing}; the fence is removed and replication goes on: run again"
            )
        self.state.switch_lsn = lsn
        self.state.save()
        self._drop_replication()
        self._restore_identities()
        self.state.switched = True
        self.state.save()
        log.info("%r: switched at %s; deploy the new map, then clean up", self, lsn)

    # -- teardown ------------------------------------------------------------------------
    def _drop_replication(self) -> None:
        """Subscription (its slots with it), any slot left of the move, publication."""
        subscription = self._subscription()
        if subscription is not None:
            self.target.run(f"ALTER SUBSCRIPTION {self._quoted} DISABLE")
            try:
                self.target.run(f"DROP SUBSCRIPTION {self._quoted}")
            except Exception:  # the source unreachable: keep its slots, drop ours below
                log.warning("%r: dropping the subscription with its slot failed", self)
                self.target.run(f"ALTER SUBSCRIPTION {self._quoted} SET (slot_name = NONE)")
                self.target.run(f"DROP SUBSCRIPTION {self._quoted}")
        slots = [self._literal]
        if subscription is not None:
            slots.append(sql.quote_literal(f"pg_{subscription}_sync_%"))
        condition = " OR ".join(
            f"slot_name = {slots[0]}" if i == 0 else f"slot_name LIKE {s}"
            for i, s in enumerate(slots)
        )
        deadline = self.clock() + 30
        while self.source.run(f"SELECT 1 FROM pg_replication_slots WHERE {condition}"):
            self.source.run(
                f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                f"WHERE ({condition}) AND NOT active"
            )
            if self.clock() > deadline:
                raise ReplicationError(f"{self!r}: a replication slot stays in use")
            time.sleep(self.poll_s)
        self.source.run(f"DROP PUBLICATION IF EXISTS {self._quoted}")

    def leftovers(self) -> dict[str, list[str]]:
        """The move's objects still present: publication, slots, subscription."""
        return {
            "publications": [
                str(r[0])
                for r in self.source.run(
                    f"SELECT pubname FROM pg_publication WHERE pubname = {self._literal}"
                )
            ],
            "slots": [
                str(r[0])
                for r in self.source.run(
                    f"SELECT slot_name FROM pg_replication_slots WHERE slot_name = {self._literal}"
                )
            ],
            "subscriptions": [] if self._subscription() is None else [self.name],
        }

    def abort(self, *, copy_back: bool = False) -> None:
        """Undo a move that has not switched: drop subscription, slots, publication,
        restore the replica identities, delete the target's copies of the range and
        remove the fence. Refused after the switch (then: deploy, and clean up), and
        under a map that gives the range to the target (deployed early: switch forward,
        or deploy the old map everywhere first).

        The target's copies go only when they are copies (``move_recovery``): while the
        move streams, the source is fenced and the target caught up first, then both
        sides are compared. Rows, or versions of rows, that only the target holds were
        written there under a new map: the abort is refused naming them (the fence is
        removed, replication goes on), unless ``copy_back``, which copies them to the
        source once the replication is dropped, looks again, and only then deletes.
        """
        if self.state.switched:
            raise ReplicationError(
                f"{self!r} has switched: deploy the new map and run the cleanup, or call the "
                "switch off with unfence() before the deploy"
            )
        early = early_deploy(self.move, switched=False)
        if early is not None:
            raise ReplicationError(f"--abort refused: {early}")
        why = self._writes_refusal()
        if why is not None and not copy_back:
            self._open_fence()
            raise ReplicationError(why)
        self._drop_replication()
        self._restore_identities()
        if why is not None:
            self._open_fence()  # the source takes the copies back, and the old map's writes
            for copied in move_recovery.copy_back(self.move):
                log.warning("%r: copied back to %s: %s", self, self.source.name, copied)
            again = self._writes_refusal(fence=False)
            if again is not None:  # a process still on the new map writes to the target
                raise ReplicationError(again)
        self._delete_target_copies()
        self.fence.remove()
        self.state.forget()
        log.info("%r: aborted; everything it made is removed", self)

    def _writes_refusal(self, *, fence: bool = True) -> str | None:
        """Why the target's copies cannot be deleted (``move_recovery.refusal``), or None.

        While the subscription streams, the source is fenced first (``fence``) and the
        target left to confirm the source's last write, so a difference is a write made
        on the target, not one still in flight; the fence stays for the caller to keep
        or remove."""
        streaming = self._subscription() is not None and set(self._states().values()) == {"r"}
        if fence and streaming:
            self.state.fenced = True
            self.state.save()  # before: a kill during install still finds (and removes) it
            self.fence.install()
            try:
                self.wait_caught_up()
            except BaseException:
                self._open_fence()
                raise
        return refusal(
            target_writes(self.move),
            source=self.source.name,
            target=self.target.name,
            doing="--abort",
        )

    def _open_fence(self) -> None:
        self.fence.remove()
        self.state.fenced = False
        self.state.save()

    def unfence(self) -> None:
        """Call a switch off before the deploy: remove the fence and forget the move.
        The target keeps its copies of the range (no longer followed, and owned by no
        map); the next start of a move of the range deletes them first. Refused once the
        map gives the range to the target. Before the switch, ``abort()`` instead."""
        if self.move.deployed:
            raise ReplicationError(
                f"the map gives the range to {self.target.name}: the switch cannot be "
                "called off after the deploy"
            )
        if not self.state.switched:
            raise ReplicationError(f"{self!r} has not switched: call it off with abort()")
        self.fence.remove()
        self.state.forget()
        log.info("%r: the switch is called off; the fence is removed", self)

    def cleanup(self, *, batch: int = 1000, dry_run: bool = False) -> list[CleanupReport]:
        """After the switch and the deploy: delete the source's rows of the range,
        children first, in batches, then remove the fence and the state.

        Unlike the portable cleanup, no row is kept for being absent on the target:
        the switch compared both sides while the range was fenced, so every source row
        of the range reached the target; one missing there now was deleted by the
        application since the deploy, and keeping it would leave a stale copy behind.

        Without a switch on record (a cleanup that finished, and forgot the move, run
        again; a lost state file), nothing proves the target got every row: the
        portable cleanup runs instead, which deletes only rows the target holds and
        reports the others. Refused while the move still replicates. The same portable
        rule applies when the fence no longer refuses inserts and updates on the source
        (removed by hand after the switch): a process still on the old map may have
        written rows there that the target never saw.
        """
        if not self.move.deployed:
            raise ReplicationError(
                f"the map still gives the range to {self.source.name}: deploy the new map "
                "before cleaning up"
            )
        if not self.state.switched:
            if any(self.leftovers().values()):
                raise ReplicationError(
                    f"{self!r} has not switched and still replicates: deploy only after "
                    "--switch (now: --abort, or deploy the old map again and --switch)"
                )
            return self.move.cleanup(dry_run=dry_run)
        if not self.fence.holds(("INSERT", "UPDATE")):
            # The switch proved the target had every row while the fence held; without
            # it, a process still on the old map may have written the range since: only
            # the portable cleanup's rule (delete what the target holds) is safe.
            log.warning(
                "%r: the fence no longer refuses inserts and updates on %s: cleaning up "
                "as the portable mover does (rows the target lacks are kept and reported)",
                self,
                self.source.name,
            )
            # The switch happened: the target owns the range, so a row it holds is the
            # row whatever its version (move_recovery.source_copies after a switch).
            self.move.state.switched = True
            return self.move.cleanup(dry_run=dry_run)
        reports = []
        if not dry_run:
            self.fence.remove(["DELETE"])  # the copies go; inserts and updates stay closed
        for table in reversed(self.tables):
            report = CleanupReport(table.label, dry_run=dry_run)
            if dry_run:
                report.deleted = self._count(self.source, table)
            else:
                key = self._key(table)
                while True:
                    gone = self.source.run(
                        f"DELETE FROM {table.table_sql} WHERE {key} IN (SELECT {key} FROM "
                        f"{table.table_sql} WHERE {table.where} LIMIT {int(batch)}) "
                        f"RETURNING {key}"
                    )
                    report.deleted += len(gone)
                    if len(gone) < batch:
                        break
            log.info("%s", report)
            reports.append(report)
        if not dry_run:
            self.fence.remove()
            self.state.forget()
        return reports

    def _key(self, table: PgTable) -> str:
        literal = sql.quote_literal(table.table_sql)
        keys = [sql.quote_ident(r[0]) for r in self.source.run(sql.KEY_SQL.format(table=literal))]
        if len(keys) != 1:
            raise ReplicationError(f"{table.label}: a move needs a one-column primary key")
        return keys[0]

    def close(self) -> None:
        """Close both sides' connections."""
        self.source.close()
        self.target.close()

    def __enter__(self) -> LogicalMove:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, *, switch: bool = True) -> None:
        """Check, start (or resume), wait for the copy and the catch-up, and switch.

        A switch that compared equal and was stopped while dropping the replication
        (its position is in the state) is finished by any run, with or without
        ``switch``: the fence is on and the target complete, and starting over would
        only copy the same rows again."""
        if self.state.switched:
            return
        if self.state.switch_lsn is None:
            self.check()
            self.start()
            self.wait_copied()
            self.wait_caught_up()
            if not switch:
                return
        self.switch()
