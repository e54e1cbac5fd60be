"""The lease state machine that every coordinator shares: claim, renew, fence, release.

A lease claims the lowest free id of a node field's range for ``ttl`` seconds at its
generator's first id (a generator only ``bind``s it when built, with no I/O, so that
building one never waits on or fails for the coordinator), renews it from then on
every ``ttl / 3`` in a daemon thread with a compare-and-renew, and releases it at exit or
when garbage collected. It fences: each lease has a local deadline, ``ttl - margin``
after the start of its last successful claim or renewal (measured on this host's
monotonic clock, before the request was sent, so the server's expiry is always later).
Past the deadline the generator raises ``LeaseLostError`` at the start of the next time
unit; the lease then claims a fresh id (new token) in the background and the generator
resumes with it. The margin (``ttl / 4`` by default) must cover one time unit of ids
issued after the deadline, the difference in clock rate between this host and the
lease server over one ttl, and the clock skew between the hosts that may hold the id
next (their ids must be later than ours). Keep hosts NTP-synchronised well inside the
margin.

A coordinator can lose its state while leases are live (Redis restarted empty, lease
rows deleted or restored from a backup): then a live holder's id looks free. Two rules
keep that from duplicating ids. A renewal that finds its key or row gone (or still its
own but expired) re-takes the same id, so a live process keeps its id instead of taking
a neighbour's. And a claim made while the coordinator's state is younger than
``ttl + margin`` (the server restarted, or its lease records were wiped) is
*quarantined*: the id is held and renewed, but not used, until every earlier holder's
deadline has passed (each stopped at most ``ttl - margin`` after its last renewal, which
came before the loss; the margin covers clock skew). Its stored token carries the
prefix ``q:`` while it waits, and a live earlier holder that renews during the wait takes
its id back; the quarantined claimant then claims another one.

What differs per coordinator (Redis, a SQL database) is a ``LeaseBackend``: four
atomic operations and what to do in a forked child. Forks are noticed lazily, by pid,
at the next use: the renewer thread and the sockets of the parent do not exist in the
child. The only thing done at fork time is to hold the lease's I/O lock across it, so no
renewal is half done (a socket mid-reply, an open SQLite transaction) in the copy.

Time here is a ``MonotonicClock`` (``clock=``): deadlines, renewal pauses and quarantine
waits all read it, so tests run them on a manual clock against the real coordinators.

Every event an operator acts on is logged on ``uid_fields.leases`` (see docs/logging.md):
a claim (INFO, with the id), a quarantine (WARNING, with the wait), a renewal that failed
(WARNING, each time, with the time left), a lost id (ERROR), a re-claim that fails
(WARNING, the advice once, then at most once per ``CLAIM_WARNING_INTERVAL_S``), a
release (INFO).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ..._internal import forks
from ..._internal.redact import redact
from ..._internal.validate import shown
from ...clock import MonotonicClock
from ...errors import CoordinatorUnavailableError, LeaseLostError, WorkerIdsExhaustedError

__all__ = [
    "CLAIM_WARNING_INTERVAL_S",
    "FALLBACKS",
    "QUARANTINED",
    "Claimed",
    "Lease",
    "LeaseBackend",
    "LeaseState",
    "check_ttl",
]

log = logging.getLogger("uid_fields.leases")

#: The prefix of a stored token whose claim is still quarantined (see the module doc).
QUARANTINED = "q:"

_SYSTEM_CLOCK = MonotonicClock()

#: A lease that cannot claim an id logs it at most once per this many seconds (on the
#: lease's clock), the advice only in the first warning of a run of failures.
CLAIM_WARNING_INTERVAL_S = 60.0

_QUARANTINE_WHY = (
    "the coordinator lost its lease records less than ttl + margin ago (restarted empty, "
    "failed over, or its lease rows deleted), so an earlier holder may still be using "
    "this id until its deadline"
)

FALLBACKS = (
    "or give the field a fixed value per process instead: an int (worker=3), an "
    "environment variable per process or pod (FromEnv('WORKER_ID'), or "
    "{'env': 'WORKER_ID'} in settings), or a lease on another coordinator "
    "(RedisLease / DatabaseLease)"
)


class Claimed(NamedTuple):
    """What a backend's claim took."""

    value: int
    #: The token as stored: ``QUARANTINED + token`` while ``wait_ms`` runs.
    stored: str
    #: How long (by the coordinator's clock, from the claim) before the id may be used:
    #: 0 unless the coordinator's state is younger than the quarantine.
    wait_ms: int


class LeaseBackend(Protocol):
    where: str

    def claim(
        self, name: str, token: str, maximum: int, ttl_ms: int, quarantine_ms: int
    ) -> Claimed | None:
        """Take the lowest free id in 0..maximum for ``token``; None when all are held.

        When the coordinator's state (its run, or its lease records) is younger than
        ``quarantine_ms``, store ``QUARANTINED + token`` and say how long to wait.
        """
        ...

    def renew(self, name: str, value: int, stored: str, ttl_ms: int) -> bool:
        """Extend the lease if ``stored`` still holds it (compare-and-renew).

        An active (not quarantined) holder also re-takes its id when the key or row is
        gone, or still its own but expired, and takes it back from a quarantined claim.
        """
        ...

    def activate(self, name: str, value: int, stored: str, token: str, ttl_ms: int) -> bool:
        """End a quarantine: replace ``stored`` by ``token`` if it still holds the id."""
        ...

    def release(self, name: str, value: int, stored: str, hold_ms: int) -> None:
        """Give the id back, but only ``hold_ms`` from now: a clock-skew margin."""
        ...

    def after_fork(self) -> None:
        """In a forked child: drop (never close) the parent's connections."""
        ...

    def unavailable(self, exc: BaseException) -> CoordinatorUnavailableError: ...


@dataclass(frozen=True, slots=True)
class Held:
    """The id a lease holds, replaced as a whole (readers never see half an update)."""

    value: int
    token: str
    stored: str
    #: Fencing deadline on the lease's monotonic clock.
    deadline: float
    #: The clock reading from which the id may be used: 0.0 once active.
    usable_at: float = 0.0

    @property
    def active(self) -> bool:
        return self.usable_at == 0.0


class LeaseState:
    """Everything a lease holds, apart from the public object: the renewer thread and
    the finalizer refer to this, so the lease itself can be garbage collected."""

    def __init__(
        self,
        backend: LeaseBackend,
        name: str,
        ttl: float,
        margin: float,
        clock: MonotonicClock = _SYSTEM_CLOCK,
    ) -> None:
        self.backend = backend
        self.clock = clock
        self.name = name
        self.ttl = ttl
        self.margin = margin
        self.ttl_ms = max(1, round(ttl * 1000))
        # A released id stays taken this long, so a host whose clock is behind ours by
        # less than the margin cannot re-issue the times we just used.
        self.hold_ms = max(1, round(margin * 1000))
        # A claim on a coordinator whose state is younger than this waits it out: every
        # earlier holder stopped by ttl - margin after its last renewal, plus the skew.
        self.quarantine_ms = max(1, round((ttl + margin) * 1000))
        self.interval = ttl / 3
        self.pid = os.getpid()
        self.io_lock = threading.Lock()
        self.held: Held | None = None
        #: Whether an id was ever handed to a generator in this process: until then
        #: ``current`` claims in the caller (see ``bind``).
        self.started = False
        self.field: str | None = None
        self.maximum: int | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.closed = False
        self.claims = 0
        self.losses = 0
        self.quarantines = 0
        self.lost_reason = ""
        self.last_error: BaseException | None = None
        #: When the renewer last logged a failed claim, and how many failed since then.
        self.claim_warned_at: float | None = None
        self.claim_failures = 0
        self.fork_holds_lock = False
        forks.quiet_across_fork(self)

    # -- fork ------------------------------------------------------------------------------
    def _before_fork(self) -> None:
        # Wait for a renewal in flight (bounded: a hung coordinator must not stop forks).
        self.fork_holds_lock = self.io_lock.acquire(timeout=10)

    def _after_fork(self) -> None:
        if self.fork_holds_lock:
            self.fork_holds_lock = False
            self.io_lock.release()

    # -- process identity --------------------------------------------------------------
    def check_pid(self) -> bool:
        """True (after resetting) when this is the first use in a forked child."""
        if os.getpid() == self.pid:
            return False
        # The parent's id, token, thread and sockets are not this process's.
        self.pid = os.getpid()
        self.io_lock = threading.Lock()
        self.held = None
        self.stop = threading.Event()
        self.thread = None
        self.claim_warned_at, self.claim_failures = None, 0
        self.backend.after_fork()
        return True

    # -- what generators call ------------------------------------------------------------
    def bind(self, field: str, maximum: int) -> None:
        """Record which node field this lease serves, without I/O.

        A generator binds its leases when it is built and claims at its first id: a
        models module with module-level generators must import where the coordinator
        is down or its table not made yet (a build step's ``collectstatic``).
        """
        if self.closed:
            raise ValueError(f"lease {self.name!r} was released; make a new one")
        if self.field is not None and (field, maximum) != (self.field, self.maximum):
            raise ValueError(
                f"lease {self.name!r} already leases {self.field} ids 0..{self.maximum}; "
                f"use one lease object per node field (asked for {field} 0..{maximum})"
            )
        self.field, self.maximum = field, maximum

    def acquire(self, field: str, maximum: int) -> int:
        """The id held, claiming one first if needed; waits out a quarantine.

        Only a first claim (a generator's first id) waits here, at most ``ttl + margin``
        and only right after the coordinator lost its state; later re-claims happen in
        the renewal thread while the generator is fenced.
        """
        self.check_pid()
        self.bind(field, maximum)
        try:
            while True:
                held = self.held
                if held is not None and held.active and self.clock.now() < held.deadline:
                    self.started = True
                    return held.value
                with self.io_lock:
                    held = self.held
                    if held is None or self.clock.now() >= held.deadline:
                        if held is not None:
                            self.drop_locked("it was not renewed before its deadline")
                        held = self.claim_locked(field, maximum)
                        if not held.active:
                            log.warning(
                                "%s: the first id waits %.2f s: %s",
                                self.describe(held.value),
                                held.usable_at - self.clock.now(),
                                _QUARANTINE_WHY,
                            )
                    # The renewer keeps a quarantined claim alive while this waits.
                    self.start_thread()
                if not held.active:
                    self.clock.sleep(max(0.0, held.usable_at - self.clock.now()))
                    with self.io_lock:
                        unanswered = (
                            self.held is held
                            and not self.activate_locked(held)
                            and self.held is held  # not dropped: the coordinator failed
                        )
                    if unanswered:
                        error = self.last_error or TimeoutError("no answer")
                        raise self.backend.unavailable(error) from error
        finally:
            # Even when this claim failed (a forked child, Redis down): the renewer
            # keeps trying, so the lease recovers once the coordinator is back.
            self.start_thread()

    def current(self, field: str) -> int:
        forked = self.check_pid()
        if not self.started and self.field is not None and self.maximum is not None:
            # The first id of this lease in this process: claim now, in the caller, so
            # that a coordinator that cannot answer is a CoordinatorUnavailableError
            # there (as it was when generators claimed as they were built), and a first
            # claim that must wait out a quarantine waits here. Until one succeeds, each
            # call tries again (the renewer thread tries meanwhile too).
            return self.acquire(self.field, self.maximum)
        if forked and self.field is not None and self.maximum is not None:
            # First id of a forked child: claim an id of its own, or stay fenced.
            try:
                return self.acquire(self.field, self.maximum)
            except (CoordinatorUnavailableError, WorkerIdsExhaustedError) as exc:
                self.last_error = exc
                self.lost_reason = "this forked process has not claimed an id yet"
                self.start_thread()
                raise LeaseLostError(self.lost_message(field)) from exc
        held = self.held
        if held is None:
            raise LeaseLostError(self.lost_message(field))
        now = self.clock.now()
        if now >= held.deadline:
            self.lost_reason = (
                f"it was not renewed for {self.ttl - self.margin:g} s (ttl {self.ttl:g} s "
                f"minus a {self.margin:g} s safety margin)"
            )
            raise LeaseLostError(self.lost_message(field))
        if not held.active:
            self.lost_reason = (
                f"{field} {held.value} was claimed after the coordinator lost its state and "
                f"is held unused for another {max(0.0, held.usable_at - now):.2f} s, until "
                "every earlier holder's deadline has passed"
            )
            raise LeaseLostError(self.lost_message(field))
        return held.value

    def describe(self, value: int | None) -> str:
        """How log lines name this lease: ``lease 'orders' on Redis … (worker 3)``."""
        held = "" if value is None else f" ({self.field or 'node'} {value})"
        return f"lease {self.name!r} on {self.backend.where}{held}"

    def lost_message(self, field: str) -> str:
        error = f"; last error: {self.last_error}" if self.last_error is not None else ""
        return (
            f"{field} lease {self.name!r} on {self.backend.where} is not safe to use: "
            f"{self.lost_reason or 'no id is held'}{error}. Ids stopped before another "
            "process can claim the same id; they resume once the lease claims a fresh one."
        )

    # -- claiming and renewing (io_lock held) ----------------------------------------------
    def claim_locked(self, field: str, maximum: int) -> Held:
        token = f"{uuid.uuid4().hex} {socket.gethostname()} pid={os.getpid()}"
        started = self.clock.now()
        try:
            claimed = self.backend.claim(self.name, token, maximum, self.ttl_ms, self.quarantine_ms)
        except Exception as exc:
            if isinstance(exc, CoordinatorUnavailableError):
                raise
            raise self.backend.unavailable(exc) from exc
        if claimed is None:
            raise WorkerIdsExhaustedError(
                f"all {maximum + 1} {field} ids (0..{maximum}) of lease {self.name!r} on "
                f"{self.backend.where} are held by live processes. Stop some, wait up to "
                f"{self.ttl:g} s for dead holders' leases to expire, or use a layout with "
                f"more {field} bits",
                count=maximum + 1,
            )
        usable_at = 0.0
        if claimed.wait_ms > 0:
            # Counted from the reply, which came after the coordinator's clock reading.
            usable_at = self.clock.now() + claimed.wait_ms / 1000
            self.quarantines += 1
        held = Held(
            claimed.value, token, claimed.stored, started + self.ttl - self.margin, usable_at
        )
        self.held = held
        self.claims += 1
        self.last_error = None
        self.lost_reason = ""
        self.claim_warned_at = None  # the next failure starts a new run: its advice again
        self.claim_failures = 0
        quarantine = f", held unused for {claimed.wait_ms / 1000:.2f} s" if usable_at else ""
        log.info(
            "%s: claimed (claim %d of this process%s)",
            self.describe(claimed.value),
            self.claims,
            quarantine,
        )
        return held

    def activate_locked(self, held: Held) -> bool:
        """End ``held``'s quarantine, or drop it if an earlier holder took it back."""
        started = self.clock.now()
        try:
            ok = self.backend.activate(self.name, held.value, held.stored, held.token, self.ttl_ms)
        except Exception as exc:
            self.last_error = exc  # try again at the next tick
            log.warning(
                "%s: could not end the quarantine (%s: %s); retrying",
                self.describe(held.value),
                type(exc).__name__,
                exc,
            )
            return False
        if not ok:
            self.drop_locked(
                "an earlier holder took it back while this claim waited",
                release=False,
                level=logging.WARNING,
            )
            return False
        self.held = Held(held.value, held.token, held.token, started + self.ttl - self.margin)
        self.last_error = None
        log.info("%s: in use after its quarantine", self.describe(held.value))
        return True

    def drop_locked(self, reason: str, *, release: bool = True, level: int = logging.ERROR) -> None:
        """Give up the id held: ids stop until a fresh claim (an ERROR: the lease is lost,
        unless ``level`` says otherwise)."""
        held, self.held = self.held, None
        self.losses += 1
        self.lost_reason = reason
        if held is not None:
            error = self.last_error
            log.log(
                level,
                "%s: lost: %s%s; ids stop until a fresh id is claimed",
                self.describe(held.value),
                reason,
                "" if error is None else f" (last error: {type(error).__name__}: {error})",
            )
        if held is not None and release:
            try:
                self.backend.release(self.name, held.value, held.stored, self.hold_ms)
            except Exception as exc:  # the id expires on its own
                self.last_error = exc

    def tick(self) -> bool:
        """One renewal (or re-claim after a loss); True when the lease is healthy."""
        if os.getpid() != self.pid or self.closed:
            return False
        with self.io_lock:
            held = self.held
            if held is not None:
                now = self.clock.now()
                if now >= held.deadline:
                    self.drop_locked("it was not renewed before its deadline")
                elif not held.active and now >= held.usable_at:
                    if self.activate_locked(held):
                        return True
                    if self.held is not None:
                        return False  # the activation failed on I/O: retry soon
                else:
                    started = self.clock.now()
                    try:
                        renewed = self.backend.renew(
                            self.name, held.value, held.stored, self.ttl_ms
                        )
                    except Exception as exc:
                        self.last_error = exc  # still valid until the deadline
                        log.warning(
                            "%s: renewal failed (%s: %s); %.2f s left before its ids stop",
                            self.describe(held.value),
                            type(exc).__name__,
                            exc,
                            max(0.0, held.deadline - self.clock.now()),
                        )
                        return False
                    if renewed:
                        self.held = Held(
                            held.value,
                            held.token,
                            held.stored,
                            started + self.ttl - self.margin,
                            held.usable_at,
                        )
                        self.last_error = None
                        return True
                    self.drop_locked(
                        "another holder took it (or it expired) before it was renewed",
                        release=False,
                    )
            if self.closed or self.field is None or self.maximum is None:
                return False
            try:
                held = self.claim_locked(self.field, self.maximum)
            except Exception as exc:
                self.last_error = exc
                self.warn_claim_failed(exc)
                return False
            if not held.active:  # a re-claim: the generator stays fenced meanwhile
                log.warning(
                    "%s: ids stay stopped for another %.2f s: %s",
                    self.describe(held.value),
                    held.usable_at - self.clock.now(),
                    _QUARANTINE_WHY,
                )
            return True

    def warn_claim_failed(self, exc: BaseException) -> None:
        """Log a failed re-claim: the whole error (with its advice) for the first failure
        of a run of them, then a short line at most once per ``CLAIM_WARNING_INTERVAL_S``
        with the count: the renewer retries every ``ttl / 6``, and a WARNING of several
        hundred characters each time buries everything else in the log."""
        now = self.clock.now()
        self.claim_failures += 1
        warned_at = self.claim_warned_at
        if warned_at is not None and now - warned_at < CLAIM_WARNING_INTERVAL_S:
            return
        if warned_at is None:
            log.warning(
                "%s: cannot claim an id (%s: %s); ids stay stopped, retrying every %g s "
                "(this warning repeats at most once every %g s while the claims fail)",
                self.describe(None),
                type(exc).__name__,
                exc,
                self.interval / 2,
                CLAIM_WARNING_INTERVAL_S,
            )
        else:
            # The advice was in the first warning; the cause is what may have changed.
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            log.warning(
                "%s: still cannot claim an id (%s: %s); %d more attempts failed in the "
                "last %.0f s; ids stay stopped, retrying every %g s",
                self.describe(None),
                type(cause).__name__,
                redact(str(cause)),
                self.claim_failures,
                now - warned_at,
                self.interval / 2,
            )
        self.claim_warned_at = now
        self.claim_failures = 0

    def run(self) -> None:
        healthy = True
        stop = self.stop
        while True:
            pause = self.interval if healthy else self.interval / 2
            held = self.held
            if held is not None and not held.active:
                # Wake when the quarantine ends, to activate the id without delay.
                pause = min(pause, max(0.0, held.usable_at - self.clock.now()) + 0.001)
            if self.clock.wait(stop, pause):
                return
            healthy = self.tick()

    def start_thread(self) -> None:
        if self.thread is None and not self.closed:
            self.thread = threading.Thread(
                target=self.run, name=f"uid_fields-lease-{self.name}", daemon=True
            )
            self.thread.start()

    def close(self) -> None:
        if os.getpid() != self.pid:
            return  # never release a parent's id from a forked child
        self.closed = True
        self.stop.set()
        with self.io_lock:
            held, self.held = self.held, None
            if held is not None:
                # at exit or in GC a failure is fine: the id expires on its own
                with contextlib.suppress(Exception):
                    self.backend.release(self.name, held.value, held.stored, self.hold_ms)
                    log.info("%s: released", self.describe(held.value))


def check_ttl(name: object, ttl: object, margin: object = None) -> tuple[float, float]:
    """The ``(ttl, margin)`` of a lease, or ValueError/TypeError saying what is wrong.

    Shared by the lease constructors and by the settings validator, which reports the
    same mistakes before any lease is made.
    """
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValueError(f"lease name must be a non-empty string without spaces, got {shown(name)}")
    ttl = _seconds("ttl", ttl)
    if not ttl > 0:
        raise ValueError(f"ttl must be > 0 seconds, got {ttl}")
    margin = ttl / 4 if margin is None else _seconds("margin", margin)
    if not 0 < margin <= ttl / 2:
        raise ValueError(
            f"margin must be > 0 and at most ttl / 2 ({ttl / 2:g} s) so that a renewal "
            f"every ttl / 3 lands before the deadline; got {margin}"
        )
    return ttl, margin


def _seconds(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, got {shown(value)}")
    try:
        seconds = float(value)
    except OverflowError:  # an int past the largest float: no finite number of seconds
        seconds = math.inf
    if not math.isfinite(seconds):
        raise ValueError(f"{what} must be a finite number of seconds, got {shown(value)}")
    return seconds


class Lease:
    """What RedisLease and DatabaseLease share: claim, renew, fence, release."""

    per_process = True

    def __init__(
        self,
        backend: LeaseBackend,
        name: str,
        ttl: float,
        margin: float | None,
        clock: MonotonicClock | None = None,
    ) -> None:
        ttl, margin = check_ttl(name, ttl, margin)
        self.name = name
        self.ttl = ttl
        self.margin = margin
        self._state = LeaseState(backend, name, ttl, margin, clock or _SYSTEM_CLOCK)
        # Releases the id when the lease is garbage collected, and at interpreter exit.
        self._finalizer = weakref.finalize(self, self._state.close)

    def bind(self, field: str, maximum: int) -> None:
        """Serve ``field`` ids ``0..maximum`` from the first id on; no I/O (generators
        call this when built, so building one never waits for the coordinator)."""
        self._state.bind(field, maximum)

    def acquire(self, field: str, maximum: int) -> int:
        """Claim the lowest free id in ``0..maximum`` (or return the one held)."""
        return self._state.acquire(field, maximum)

    def current(self, field: str) -> int:
        return self._state.current(field)

    def release(self) -> None:
        """Stop renewing and free the id now (also done at exit and on garbage collection)."""
        self._finalizer()

    close = release

    @property
    def value(self) -> int | None:
        """The id held now, or None."""
        held = self._state.held
        return None if held is None else held.value

    @property
    def seconds_left(self) -> float | None:
        """Seconds until the fencing deadline, or None when no id is held."""
        held = self._state.held
        return None if held is None else held.deadline - self._state.clock.now()

    @property
    def claims(self) -> int:
        """How many times this process claimed an id (1 + re-claims after losses)."""
        return self._state.claims

    @property
    def losses(self) -> int:
        """How many times the id was lost (not renewed in time, or taken)."""
        return self._state.losses

    @property
    def quarantines(self) -> int:
        """How many claims had to wait because the coordinator had just lost its state."""
        return self._state.quarantines

    @property
    def last_error(self) -> BaseException | None:
        return self._state.last_error

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
