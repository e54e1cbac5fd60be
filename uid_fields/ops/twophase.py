"""Two-phase commit across PostgreSQL shards: one coordinator for both ORM adapters.

A write that spans shards commits one database after another; a crash between two
COMMITs leaves some shards committed and the others not. Two-phase commit closes that
window:

1. **Prepare.** Each shard's transaction ends with ``PREPARE TRANSACTION '<gid>'``: the
   server makes it durable but neither commits nor forgets it. A failure here rolls every
   branch back (the prepared ones with ``ROLLBACK PREPARED``).
2. **Decide.** One row in ``uid_fields_twophase`` on the *decision database* (the first
   shard of the transaction) records the outcome. Its primary key is the transaction's
   id, and it is written with ``INSERT ... ON CONFLICT DO NOTHING``: whoever writes it
   first decides. The coordinator writes ``commit``; recovery writes ``abort`` for a
   transaction it finds undecided. So a slow coordinator and a recovery run can never
   decide differently: the loser reads the winner's outcome and follows it.
3. **Finish.** ``COMMIT PREPARED`` (or ``ROLLBACK PREPARED``) on every shard, then the
   ``commit`` row is deleted. A failure here changes nothing decided: the coordinator
   retries the branch a few times (``CommitRetry``: by default 4 attempts within 2 s, on
   a fresh connection each time), then logs an ERROR naming the branch and returns; the
   caller's transaction is committed or will be, and recovery finishes what is left.

Branch names (gids) are ``uidf:<transaction id>:<decision database>:<index>``, so
recovery, given the databases of a deployment by name, finds every in-doubt branch in
``pg_prepared_xacts`` and the database that holds its decision. ``resolve`` is that
recovery: ``manage.py uid_fields resolve-prepared`` and
``uid_fields.sqlalchemy.resolve_prepared`` call it. It skips (and reports) a branch that
another session is finishing at that moment (PostgreSQL says it "is busy").

Every decision, retry and resolution is logged on ``uid_fields.twophase``
(docs/logging.md).

Everything here speaks DB-API cursors (``%s`` parameters, as psycopg and Django's
cursors take): the adapters hand in the connections, this module decides what to send.
The server must allow prepared transactions (``max_prepared_transactions`` > 0).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from ..errors import TwoPhaseCommitError

__all__ = [
    "TABLE",
    "Branch",
    "CommitRetry",
    "Coordinator",
    "Resolution",
    "configure_commit_retry",
    "ensure_table",
    "in_doubt",
    "resolve",
]

log = logging.getLogger("uid_fields.twophase")

#: The decision table, created on a decision database by ``ensure_table``.
TABLE = "uid_fields_twophase"
PREFIX = "uidf"
Outcome = Literal["commit", "abort"]
#: Stages a coordinator passes, in order (``on_stage`` observes them).
STAGES = ("prepared", "decided", "finished")

# Database names go into gids, which go into SQL as literals (PREPARE TRANSACTION takes
# no parameter): only these characters, and no ':' (the gid's separator).
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")
_GID = re.compile(rf"^{PREFIX}:([0-9a-f]{{32}}):([A-Za-z0-9_.-]{{1,60}}):([0-9]{{1,4}})$")


class Cursor(Protocol):
    """The DB-API cursor methods this module uses."""

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...

    def fetchall(self) -> Sequence[Sequence[Any]]: ...


@dataclass(frozen=True)
class Branch:
    """One prepared transaction of a two-phase commit, as ``pg_prepared_xacts`` shows it."""

    gid: str
    transaction: str
    decision: str  # the database that holds the outcome
    index: int
    database: str  # the database (alias) it was found in
    prepared: datetime | None = None


@dataclass(frozen=True)
class CommitRetry:
    """How a coordinator retries ``COMMIT PREPARED`` on a branch that failed after the
    commit was decided (a server restarting, a connection cut).

    ``attempts`` per branch, the first included; ``backoff_s`` before the second, doubled
    each time; no attempt starts more than ``within_s`` after the first one failed. The
    wait between attempts is bounded; one attempt is as long as its connect takes (give
    the database a connect timeout).
    """

    attempts: int = 4
    backoff_s: float = 0.1
    within_s: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"attempts must be an int >= 1, got {self.attempts!r}")
        if not 0 <= self.backoff_s <= self.within_s:
            raise ValueError(
                f"backoff_s must be >= 0 and at most within_s ({self.within_s}), "
                f"got {self.backoff_s!r}"
            )


_retry = CommitRetry()


def configure_commit_retry(retry: CommitRetry) -> None:
    """The retries of every coordinator made from now on (Django's ``sharded_atomic``,
    SQLAlchemy's sessions, ``bulk_create``/``bulk_insert`` with ``two_phase=True``)."""
    global _retry
    if not isinstance(retry, CommitRetry):
        raise TypeError(f"expected a CommitRetry, got {retry!r}")
    _retry = retry


def _default_retry() -> CommitRetry:
    return _retry


#: The error PostgreSQL raises when another session is finishing a prepared transaction
#: ("prepared transaction with identifier ... is busy"): object not in prerequisite state.
_BUSY = "55000"


def _is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` (a driver's error, or Django's or SQLAlchemy's wrapper of one)
    says the prepared transaction is being finished by another session."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if state == _BUSY:
            return True
        todo += [error.__cause__, error.__context__, getattr(error, "orig", None)]
    return False


def check_name(name: str) -> str:
    """``name`` if it can be part of a gid; a ``ValueError`` naming it otherwise."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"database name {name!r} cannot take part in two-phase commit: use letters, "
            "digits, '_', '.' or '-' (at most 60)"
        )
    return name


def gid(transaction: str, decision: str, index: int) -> str:
    return f"{PREFIX}:{transaction}:{check_name(decision)}:{index}"


def parse_gid(value: str) -> tuple[str, str, int] | None:
    """(transaction, decision database, index) of a gid this module made, else None."""
    match = _GID.match(value)
    if match is None:
        return None
    return match.group(1), match.group(2), int(match.group(3))


def _literal(value: str) -> str:
    # Gids are made of checked characters only; quote anyway.
    return "'" + value.replace("'", "''") + "'"


def ensure_table(cursor: Cursor) -> None:
    """Create the decision table if it is missing (run in autocommit, outside a block)."""
    cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} ("
        " transaction varchar(32) PRIMARY KEY,"
        " outcome varchar(6) NOT NULL CHECK (outcome IN ('commit', 'abort')),"
        " decided_at timestamptz NOT NULL DEFAULT now())"
    )


def prepare(cursor: Cursor, branch_gid: str) -> None:
    """End the cursor's open transaction as a prepared one named ``branch_gid``."""
    cursor.execute(f"PREPARE TRANSACTION {_literal(branch_gid)}")


def decide(cursor: Cursor, transaction: str, outcome: Outcome) -> Outcome:
    """Record ``outcome`` unless one is recorded already; the outcome that holds."""
    cursor.execute(
        f"INSERT INTO {TABLE} (transaction, outcome) VALUES (%s, %s) "
        "ON CONFLICT (transaction) DO NOTHING",
        (transaction, outcome),
    )
    cursor.execute(f"SELECT outcome FROM {TABLE} WHERE transaction = %s", (transaction,))
    rows = cursor.fetchall()
    decided = rows[0][0] if rows else outcome
    return "commit" if decided == "commit" else "abort"


def finish(cursor: Cursor, branch_gid: str, outcome: Outcome) -> bool:
    """``COMMIT PREPARED`` or ``ROLLBACK PREPARED`` a branch; False if it was already gone."""
    cursor.execute("SELECT 1 FROM pg_prepared_xacts WHERE gid = %s", (branch_gid,))
    if not cursor.fetchall():
        return False
    verb = "COMMIT" if outcome == "commit" else "ROLLBACK"
    cursor.execute(f"{verb} PREPARED {_literal(branch_gid)}")
    return True


def forget(cursor: Cursor, transaction: str) -> None:
    """Delete a ``commit`` decision once no branch of it is left prepared.

    ``abort`` rows stay: a coordinator that wakes up after recovery aborted its
    transaction must still find that outcome rather than write ``commit``.
    """
    cursor.execute(
        f"DELETE FROM {TABLE} WHERE transaction = %s AND outcome = 'commit'", (transaction,)
    )


def in_doubt(cursor: Cursor, database: str) -> list[Branch]:
    """The prepared branches made by this module in the cursor's database."""
    cursor.execute(
        "SELECT gid, prepared FROM pg_prepared_xacts "
        "WHERE database = current_database() AND gid LIKE %s ORDER BY gid",
        (f"{PREFIX}:%",),
    )
    found = []
    for name, prepared in cursor.fetchall():
        parsed = parse_gid(name)
        if parsed is not None:
            found.append(Branch(name, parsed[0], parsed[1], parsed[2], database, prepared))
    return found


@dataclass
class Coordinator:
    """Commit the open transactions of several PostgreSQL databases all-or-nothing.

    The adapter opens a transaction per database and lets the application write; then
    ``commit(in_block, side)`` prepares each (through ``in_block[name]``, a cursor inside
    that transaction), decides and finishes through ``side[name]``, a cursor of another
    connection to the same database in autocommit mode (``COMMIT PREPARED`` cannot run
    inside a transaction block). ``on_stage`` observes ``STAGES`` (tests kill the
    process there). ``retry``: how a branch whose commit fails after the decision is
    retried (``configure_commit_retry`` sets the default).
    """

    databases: Sequence[str]
    on_stage: Callable[[str], None] | None = None
    transaction: str = field(default_factory=lambda: uuid.uuid4().hex)
    retry: CommitRetry = field(default_factory=_default_retry)

    def __post_init__(self) -> None:
        self.databases = list(dict.fromkeys(check_name(d) for d in self.databases))
        if not self.databases:
            raise ValueError("two-phase commit needs at least one database")

    @property
    def decision(self) -> str:
        return self.databases[0]

    def gids(self) -> dict[str, str]:
        return {d: gid(self.transaction, self.decision, i) for i, d in enumerate(self.databases)}

    def _stage(self, name: str) -> None:
        if self.on_stage is not None:
            self.on_stage(name)

    def commit(
        self,
        in_block: Callable[[str], Cursor],
        side: Callable[[str], Cursor],
        discard: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Prepare, decide, finish; the gids left prepared (normally none).

        Raises, with nothing committed, if a prepare fails or recovery already aborted
        this transaction. Once the commit is decided it no longer raises: the
        transaction is committed, or will be. A branch whose ``COMMIT PREPARED`` fails is
        retried (``retry``; ``discard(database)`` first drops the side connection, so the
        next ``side(database)`` connects afresh); one still failing is logged as an ERROR
        naming its gid, returned, and left to ``resolve`` (its rows stay locked until
        then)."""
        gids = self.gids()
        prepared: list[str] = []
        try:
            for database in self.databases:
                prepare(in_block(database), gids[database])
                prepared.append(database)
        except Exception:
            self._abort(side, [gids[d] for d in prepared], prepared)
            raise
        self._stage("prepared")
        outcome = decide(side(self.decision), self.transaction, "commit")
        if outcome != "commit":
            self._abort(side, list(gids.values()), self.databases)
            log.error(
                "two-phase transaction %s was aborted by recovery before its commit was "
                "decided: nothing of it was committed",
                self.transaction,
            )
            raise TwoPhaseCommitError(
                f"two-phase transaction {self.transaction} was aborted by recovery before "
                "its commit was decided (it stayed prepared longer than recovery waits): "
                "nothing of it was committed"
            )
        log.info(
            "two-phase transaction %s: commit decided (recorded on %s), committing %s",
            self.transaction,
            self.decision,
            ", ".join(self.databases),
        )
        self._stage("decided")
        unfinished = self._finish_all(side, discard, gids)
        if not unfinished:
            forget(side(self.decision), self.transaction)
        self._stage("finished")
        return [gids[database] for database in unfinished]

    def _finish_all(
        self,
        side: Callable[[str], Cursor],
        discard: Callable[[str], None] | None,
        gids: Mapping[str, str],
    ) -> list[str]:
        """``COMMIT PREPARED`` on every database, retrying those that fail; the databases
        where it still failed (each logged as an ERROR)."""
        retry = self.retry
        pending = list(self.databases)
        errors: dict[str, BaseException] = {}
        first_failure: float | None = None
        pause = retry.backoff_s
        attempt = 0
        while True:
            attempt += 1
            for database in list(pending):
                try:
                    finish(side(database), gids[database], "commit")
                except Exception as exc:
                    errors[database] = exc
                    log.warning(
                        "two-phase transaction %s is committed, but COMMIT PREPARED of %s "
                        "on %s failed (attempt %d of %d: %s: %s)",
                        self.transaction,
                        gids[database],
                        database,
                        attempt,
                        retry.attempts,
                        type(exc).__name__,
                        exc,
                    )
                    if discard is not None:
                        try:
                            discard(database)  # the next attempt connects afresh
                        except Exception as dropped:  # it is broken anyway
                            log.debug("discarding the connection to %s: %s", database, dropped)
                    continue
                pending.remove(database)
                if attempt > 1:
                    log.info(
                        "two-phase transaction %s: committed %s on %s at attempt %d",
                        self.transaction,
                        gids[database],
                        database,
                        attempt,
                    )
            now = time.monotonic()
            if first_failure is None:
                first_failure = now
            if (
                not pending
                or attempt >= retry.attempts
                or now + pause - first_failure > retry.within_s
            ):
                break
            time.sleep(pause)
            pause *= 2
        for database in pending:
            error = errors[database]
            log.error(
                "two-phase transaction %s is committed (decided on %s) but still prepared "
                "on %s after %d attempts (%s: %s): prepared transaction %s holds its rows' "
                "locks until it is committed. Once %s is reachable run `manage.py "
                "uid_fields resolve-prepared` (Django) or "
                "uid_fields.sqlalchemy.resolve_prepared(engines) (SQLAlchemy)",
                self.transaction,
                self.decision,
                database,
                attempt,
                type(error).__name__,
                error,
                gids[database],
                database,
            )
        if not pending:
            log.info("two-phase transaction %s: committed everywhere", self.transaction)
        return pending

    def _abort(
        self, side: Callable[[str], Cursor], gids: Sequence[str], databases: Sequence[str]
    ) -> None:
        for database, branch in zip(databases, gids, strict=True):
            try:
                finish(side(database), branch, "abort")
            except Exception as exc:  # recovery rolls back what is left (no decision)
                log.warning(
                    "could not roll back prepared branch %s on %s (%s: %s); run resolve-prepared",
                    branch,
                    database,
                    type(exc).__name__,
                    exc,
                )


@dataclass
class Resolution:
    """What ``resolve`` did: branches committed and rolled back, and those it left."""

    committed: list[Branch] = field(default_factory=list)
    rolled_back: list[Branch] = field(default_factory=list)
    waiting: list[Branch] = field(default_factory=list)  # younger than ``older_than``
    unreachable: list[Branch] = field(default_factory=list)  # decision database not given
    #: Being committed or rolled back by another session (a live coordinator, another
    #: recovery run) while this one looked: left to it.
    busy: list[Branch] = field(default_factory=list)

    @property
    def left(self) -> int:
        """How many branches are still prepared after this run, as far as it knows."""
        return len(self.waiting) + len(self.unreachable) + len(self.busy)

    def lines(self) -> list[str]:
        out = []
        for verb, branches in (
            ("committed", self.committed),
            ("rolled back", self.rolled_back),
            ("left (younger than the grace period)", self.waiting),
            ("left (its decision database is not configured)", self.unreachable),
            ("left (busy: another session is finishing it)", self.busy),
        ):
            out += [f"{verb}: {b.gid} on {b.database}" for b in branches]
        return out

    def summary(self) -> str:
        busy = f" ({len(self.busy)} busy)" if self.busy else ""
        return (
            f"{len(self.committed)} branches committed, {len(self.rolled_back)} rolled "
            f"back, {self.left} left{busy}"
        )


def resolve(
    side: Mapping[str, Cursor],
    *,
    older_than_s: float = 60.0,
    now: datetime | None = None,
) -> Resolution:
    """Finish every in-doubt branch in ``side`` (database name -> autocommit cursor).

    A branch whose transaction has a ``commit`` decision is committed. One without a
    decision that has been prepared for more than ``older_than_s`` is decided ``abort``
    (so a coordinator still alive cannot commit it later) and rolled back; younger ones
    are left, since their coordinator may be between prepare and decide. A branch that
    another session is finishing right now ("is busy": a live coordinator committing it)
    is left to that session and reported in ``busy``.
    """
    branches = [b for name, cursor in side.items() for b in in_doubt(cursor, name)]
    result = Resolution()
    by_transaction: dict[str, list[Branch]] = {}
    for branch in branches:
        by_transaction.setdefault(branch.transaction, []).append(branch)
    for transaction, group in by_transaction.items():
        decision = group[0].decision
        if decision not in side:
            log.warning(
                "resolve: left %s: its decision database %s was not given (give every "
                "database of the deployment)",
                ", ".join(f"{b.gid} on {b.database}" for b in group),
                decision,
            )
            result.unreachable += group
            continue
        cursor = side[decision]
        ensure_table(cursor)
        cursor.execute(f"SELECT outcome FROM {TABLE} WHERE transaction = %s", (transaction,))
        rows = cursor.fetchall()
        if rows:
            outcome: Outcome = "commit" if rows[0][0] == "commit" else "abort"
        else:
            if not _old_enough(cursor, group, older_than_s, now):
                result.waiting += group
                continue
            outcome = decide(cursor, transaction, "abort")
            log.info(
                "resolve: two-phase transaction %s was never decided and is older than %g "
                "s: decided abort",
                transaction,
                older_than_s,
            )
        finished = True
        for branch in group:
            try:
                finish(side[branch.database], branch.gid, outcome)
            except Exception as exc:
                if not _is_busy(exc):
                    raise
                finished = False
                result.busy.append(branch)
                log.warning(
                    "resolve: left %s on %s: another session is finishing it right now "
                    "(busy: a live coordinator committing it); run resolve again if it stays",
                    branch.gid,
                    branch.database,
                )
                continue
            verb = "committed" if outcome == "commit" else "rolled back"
            log.info("resolve: %s %s on %s", verb, branch.gid, branch.database)
            (result.committed if outcome == "commit" else result.rolled_back).append(branch)
        if outcome == "commit" and finished:
            forget(cursor, transaction)
    return result


def _old_enough(
    cursor: Cursor, group: Sequence[Branch], older_than_s: float, now: datetime | None
) -> bool:
    if now is None:
        cursor.execute("SELECT now()")
        now = cursor.fetchall()[0][0]
    assert now is not None
    newest = max((b.prepared for b in group if b.prepared is not None), default=None)
    return newest is None or (now - newest).total_seconds() >= older_than_s
