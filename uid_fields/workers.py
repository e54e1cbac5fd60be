"""Where a node field's value (worker id, datacenter, server digit) comes from.

A value is a plain int (configured per deployment) or a source object. A source with
``per_process = True`` hands a forked child its own value; a fixed value cannot, and
generators refuse to reuse it in a child (see ``ForkedGeneratorError``).

Leases (``RedisLease``, ``DatabaseLease``) claim the lowest free id of the field's range
for ``ttl`` seconds, renew it every ``ttl / 3`` in a daemon thread with a
compare-and-renew, and release it at exit or when garbage collected. They fence: each
lease has a local deadline, ``ttl - margin`` after the start of its last successful
claim or renewal (measured on this host's monotonic clock, before the request was
sent, so the server's expiry is always later). Past the deadline the generator raises
``LeaseLostError`` at the start of the next time unit; the lease then claims a fresh
id (new token) in the background and the generator resumes with it. The margin
(``ttl / 4`` by default) must cover one time unit of ids issued after the deadline,
the difference in clock rate between this host and the lease server over one ttl, and
the clock skew between the hosts that may hold the id next (their ids must be later
than ours). Keep hosts NTP-synchronised well inside the margin.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from . import _redis
from .errors import CoordinatorUnavailableError, LeaseLostError, WorkerIdsExhaustedError

__all__ = [
    "DatabaseLease",
    "FencedSource",
    "FromEnv",
    "NodeSource",
    "NodeValue",
    "RedisLease",
    "resolve_node",
]


@runtime_checkable
class NodeSource(Protocol):
    """Anything that can produce a node field value for a field of ``bits`` bits."""

    per_process: bool

    def acquire(self, field: str, maximum: int) -> int: ...


NodeValue = int | NodeSource


class FromEnv:
    """A node value read from an environment variable (one per process or pod)."""

    per_process = False

    def __init__(self, variable: str) -> None:
        self.variable = variable

    def acquire(self, field: str, maximum: int) -> int:
        raw = os.environ.get(self.variable)
        if raw is None:
            raise ValueError(
                f"environment variable {self.variable} is not set; it must hold the "
                f"{field} id (0..{maximum}) of this process"
            )
        try:
            value = int(raw.strip())
        except ValueError:
            raise ValueError(
                f"environment variable {self.variable}={raw!r} is not an integer {field} id"
            ) from None
        return _in_range(field, value, maximum, f" (from ${self.variable})")

    def __repr__(self) -> str:
        return f"FromEnv({self.variable!r})"


def _in_range(field: str, value: int, maximum: int, origin: str = "") -> int:
    if not 0 <= value <= maximum:
        raise ValueError(f"{field}={value}{origin} is out of range 0..{maximum}")
    return value


def resolve_node(
    source: object, *, field: str, bits: int | None, maximum: int | None = None
) -> int:
    """The value of a node field from an int or a source, range-checked."""
    if maximum is None:
        if bits is None:
            raise TypeError("give bits or maximum")
        maximum = (1 << bits) - 1
    if isinstance(source, bool):
        raise TypeError(f"{field} must be an int or a node source, got {source!r}")
    if isinstance(source, int):
        return _in_range(field, source, maximum)
    if isinstance(source, NodeSource):
        return _in_range(field, source.acquire(field, maximum), maximum, f" (from {source!r})")
    raise TypeError(f"{field} must be an int or a node source, got {source!r}")


# -- leases ------------------------------------------------------------------------------


@runtime_checkable
class FencedSource(Protocol):
    """A node source whose value is only safe until a deadline: a lease.

    Generators call ``current`` when they start a time unit's block and in ``next_ids``
    (never per id); it must not do I/O, except once in a forked child to claim an id of
    its own.
    """

    per_process: bool

    def acquire(self, field: str, maximum: int) -> int: ...

    def current(self, field: str) -> int:
        """The value to use now; ``LeaseLostError`` when it is no longer safe."""
        ...


_FALLBACKS = (
    "or give the field a fixed value per process instead: an int (worker=3), an "
    "environment variable per process or pod (FromEnv('WORKER_ID'), or "
    "{'env': 'WORKER_ID'} in Django settings), or a lease on another coordinator "
    "(RedisLease / DatabaseLease)"
)


class _Backend(Protocol):
    where: str

    def claim(self, name: str, token: str, maximum: int, ttl_ms: int) -> int | None:
        """Take the lowest free id in 0..maximum for ``token``; None when all are held."""
        ...

    def renew(self, name: str, value: int, token: str, ttl_ms: int) -> bool:
        """Extend the lease if ``token`` still holds it (compare-and-renew)."""
        ...

    def release(self, name: str, value: int, token: str, hold_ms: int) -> None:
        """Give the id back, but only ``hold_ms`` from now: a clock-skew margin."""
        ...

    def after_fork(self) -> None:
        """In a forked child: drop (never close) the parent's connections."""
        ...

    def unavailable(self, exc: BaseException) -> CoordinatorUnavailableError: ...


class _LeaseState:
    """Everything a lease holds, apart from the public object: the renewer thread and
    the finalizer refer to this, so the lease itself can be garbage collected."""

    def __init__(self, backend: _Backend, name: str, ttl: float, margin: float) -> None:
        self.backend = backend
        self.name = name
        self.ttl = ttl
        self.margin = margin
        self.ttl_ms = max(1, round(ttl * 1000))
        # A released id stays taken this long, so a host whose clock is behind ours by
        # less than the margin cannot re-issue the times we just used.
        self.hold_ms = max(1, round(margin * 1000))
        self.interval = ttl / 3
        self.pid = os.getpid()
        self.io_lock = threading.Lock()
        # (value, token, deadline on time.monotonic()), replaced as a whole
        self.held: tuple[int, str, float] | None = None
        self.field: str | None = None
        self.maximum: int | None = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.closed = False
        self.claims = 0
        self.losses = 0
        self.lost_reason = ""
        self.last_error: BaseException | None = None

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
        self.backend.after_fork()
        return True

    # -- what generators call ------------------------------------------------------------
    def acquire(self, field: str, maximum: int) -> int:
        self.check_pid()
        if self.closed:
            raise ValueError(f"lease {self.name!r} was released; make a new one")
        if self.field is not None and (field, maximum) != (self.field, self.maximum):
            raise ValueError(
                f"lease {self.name!r} already leases {self.field} ids 0..{self.maximum}; "
                f"use one lease object per node field (asked for {field} 0..{maximum})"
            )
        self.field, self.maximum = field, maximum
        try:
            held = self.held
            if held is None or time.monotonic() >= held[2]:
                with self.io_lock:
                    held = self.held
                    if held is None or time.monotonic() >= held[2]:
                        if held is not None:
                            self.drop_locked("it was not renewed before its deadline")
                        held = self.claim_locked(field, maximum)
        finally:
            # Even when this claim failed (a forked child, Redis down): the renewer
            # keeps trying, so the lease recovers once the coordinator is back.
            self.start_thread()
        return held[0]

    def current(self, field: str) -> int:
        if self.check_pid() and self.field is not None and self.maximum is not None:
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
        if time.monotonic() >= held[2]:
            self.lost_reason = (
                f"it was not renewed for {self.ttl - self.margin:g} s (ttl {self.ttl:g} s "
                f"minus a {self.margin:g} s safety margin)"
            )
            raise LeaseLostError(self.lost_message(field))
        return held[0]

    def lost_message(self, field: str) -> str:
        error = f"; last error: {self.last_error}" if self.last_error is not None else ""
        return (
            f"{field} lease {self.name!r} on {self.backend.where} is not safe to use: "
            f"{self.lost_reason or 'no id is held'}{error}. Ids stopped before another "
            "process can claim the same id; they resume once the lease claims a fresh one."
        )

    # -- claiming and renewing (io_lock held) ----------------------------------------------
    def claim_locked(self, field: str, maximum: int) -> tuple[int, str, float]:
        token = f"{uuid.uuid4().hex} {socket.gethostname()} pid={os.getpid()}"
        started = time.monotonic()
        try:
            value = self.backend.claim(self.name, token, maximum, self.ttl_ms)
        except Exception as exc:
            if isinstance(exc, CoordinatorUnavailableError):
                raise
            raise self.backend.unavailable(exc) from exc
        if value is None:
            raise WorkerIdsExhaustedError(
                f"all {maximum + 1} {field} ids (0..{maximum}) of lease {self.name!r} on "
                f"{self.backend.where} are held by live processes. Stop some, wait up to "
                f"{self.ttl:g} s for dead holders' leases to expire, or use a layout with "
                f"more {field} bits",
                count=maximum + 1,
            )
        held = (value, token, started + self.ttl - self.margin)
        self.held = held
        self.claims += 1
        self.last_error = None
        self.lost_reason = ""
        return held

    def drop_locked(self, reason: str, *, release: bool = True) -> None:
        held, self.held = self.held, None
        self.losses += 1
        self.lost_reason = reason
        if held is not None and release:
            try:
                self.backend.release(self.name, held[0], held[1], self.hold_ms)
            except Exception as exc:  # the id expires on its own
                self.last_error = exc

    def tick(self) -> bool:
        """One renewal (or re-claim after a loss); True when the lease is healthy."""
        if os.getpid() != self.pid or self.closed:
            return False
        with self.io_lock:
            held = self.held
            if held is not None:
                value, token, deadline = held
                if time.monotonic() >= deadline:
                    self.drop_locked("it was not renewed before its deadline")
                else:
                    started = time.monotonic()
                    try:
                        renewed = self.backend.renew(self.name, value, token, self.ttl_ms)
                    except Exception as exc:
                        self.last_error = exc  # still valid until the deadline
                        return False
                    if renewed:
                        self.held = (value, token, started + self.ttl - self.margin)
                        self.last_error = None
                        return True
                    self.drop_locked(
                        "another holder took it (or it expired) before it was renewed",
                        release=False,
                    )
            if self.closed or self.field is None or self.maximum is None:
                return False
            try:
                self.claim_locked(self.field, self.maximum)
            except Exception as exc:
                self.last_error = exc
                return False
            return True

    def run(self) -> None:
        healthy = True
        stop = self.stop
        while not stop.wait(self.interval if healthy else self.interval / 2):
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
                    self.backend.release(self.name, held[0], held[1], self.hold_ms)


def _check_ttl(name: str, ttl: float, margin: float | None) -> tuple[float, float]:
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValueError(f"lease name must be a non-empty string without spaces, got {name!r}")
    ttl = float(ttl)
    if not ttl > 0:
        raise ValueError(f"ttl must be > 0 seconds, got {ttl}")
    margin = ttl / 4 if margin is None else float(margin)
    if not 0 < margin <= ttl / 2:
        raise ValueError(
            f"margin must be > 0 and at most ttl / 2 ({ttl / 2:g} s) so that a renewal "
            f"every ttl / 3 lands before the deadline; got {margin}"
        )
    return ttl, margin


class _Lease:
    """What RedisLease and DatabaseLease share: claim, renew, fence, release."""

    per_process = True

    def __init__(self, backend: _Backend, name: str, ttl: float, margin: float | None) -> None:
        ttl, margin = _check_ttl(name, ttl, margin)
        self.name = name
        self.ttl = ttl
        self.margin = margin
        self._state = _LeaseState(backend, name, ttl, margin)
        # Releases the id when the lease is garbage collected, and at interpreter exit.
        self._finalizer = weakref.finalize(self, self._state.close)

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
        return None if held is None else held[0]

    @property
    def seconds_left(self) -> float | None:
        """Seconds until the fencing deadline, or None when no id is held."""
        held = self._state.held
        return None if held is None else held[2] - time.monotonic()

    @property
    def claims(self) -> int:
        """How many times this process claimed an id (1 + re-claims after losses)."""
        return self._state.claims

    @property
    def losses(self) -> int:
        """How many times the id was lost (not renewed in time, or taken)."""
        return self._state.losses

    @property
    def last_error(self) -> BaseException | None:
        return self._state.last_error

    def __enter__(self) -> _Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# -- Redis ---------------------------------------------------------------------------------

# The lowest free id: SET NX PX on each key in turn, in one atomic call.
_REDIS_CLAIM = """
local maximum = tonumber(ARGV[3])
for i = 0, maximum do
  if redis.call('SET', KEYS[1] .. i, ARGV[1], 'NX', 'PX', ARGV[2]) then
    return i
  end
end
return -1
"""
_REDIS_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_REDIS_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class _RedisBackend:
    def __init__(self, url: str, prefix: str, timeout: float) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.where = f"Redis {_redis.redact(url)}"
        self._connect()

    def _connect(self) -> None:
        client = _redis.redis_client(self.url, self.timeout)
        self._claim: Any = client.register_script(_REDIS_CLAIM)
        self._renew: Any = client.register_script(_REDIS_RENEW)
        self._release: Any = client.register_script(_REDIS_RELEASE)
        self.client = client

    def key(self, name: str, value: int | str) -> str:
        return f"{self.prefix}{name}:{value}"

    def claim(self, name: str, token: str, maximum: int, ttl_ms: int) -> int | None:
        value = int(self._claim(keys=[self.key(name, "")], args=[token, ttl_ms, maximum]))
        return None if value < 0 else value

    def renew(self, name: str, value: int, token: str, ttl_ms: int) -> bool:
        return bool(self._renew(keys=[self.key(name, value)], args=[token, ttl_ms]))

    def release(self, name: str, value: int, token: str, hold_ms: int) -> None:
        self._release(keys=[self.key(name, value)], args=[token, hold_ms])

    def after_fork(self) -> None:
        self._connect()

    def unavailable(self, exc: BaseException) -> CoordinatorUnavailableError:
        return _redis.unavailable(self.url, exc, "a worker id lease", _FALLBACKS)  # type: ignore[no-any-return]


class RedisLease(_Lease):
    """A node id leased from Redis.

    ``SnowflakeGenerator(TWITTER, datacenter=0, worker=RedisLease(url, "orders", ttl=10))``

    Claims the lowest free id of the field (keys ``<prefix><name>:<id>``, ``SET NX PX``),
    renews it every ``ttl / 3`` with a compare-and-renew script, and fences the
    generator ``margin`` seconds before the key could expire. A forked child claims an
    id of its own. Redis must not lose keys while they are live (a single primary; with
    replication, a failover can forget a just-claimed key).
    """

    def __init__(
        self,
        url: str,
        name: str,
        ttl: float = 10.0,
        *,
        margin: float | None = None,
        prefix: str = "uid_fields:lease:",
    ) -> None:
        timeout = min(5.0, max(0.05, float(ttl) / 3))
        self.url = url
        self._backend = _RedisBackend(url, prefix, timeout)
        super().__init__(self._backend, name, ttl, margin)

    def key(self, value: int) -> str:
        """The Redis key of id ``value``."""
        return self._backend.key(self.name, value)

    def __repr__(self) -> str:
        return f"RedisLease({_redis.redact(self.url)!r}, {self.name!r}, ttl={self.ttl:g})"


# -- databases -----------------------------------------------------------------------------

_NOW_MS = {
    "postgresql": "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint",
    "mysql": "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)",
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
}
_ID_COLUMN = {
    "postgresql": "id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    "mysql": "id bigint AUTO_INCREMENT PRIMARY KEY",
    "sqlite": "id integer PRIMARY KEY AUTOINCREMENT",
}
_DDL = {
    dialect: f"""CREATE TABLE IF NOT EXISTS {{t}} (
    {id_column},
    name varchar(100) NOT NULL,
    node integer NOT NULL,
    token varchar(200) NULL,
    expires_ms bigint NOT NULL,
    claimed_ms bigint NOT NULL,
    CONSTRAINT {{t}}_name_node UNIQUE (name, node)
)"""
    for dialect, id_column in _ID_COLUMN.items()
}
_DIALECTS = {
    "psycopg": "postgresql",
    "psycopg2": "postgresql",
    "pymysql": "mysql",
    "MySQLdb": "mysql",
    "mysql": "mysql",
    "sqlite3": "sqlite",
    "postgresql": "postgresql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}


def _identifier(name: str) -> str:
    if not name.replace("_", "a").isalnum() or not name[:1].isalpha() or len(name) > 50:
        raise ValueError(f"table must be a plain SQL identifier, got {name!r}")
    return name


def _connect_url(url: str) -> Callable[[], Any]:
    """A connection factory for postgresql://, mysql:// and sqlite:///path URLs."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme in ("postgresql", "postgres"):

        def connect_pg() -> Any:
            import psycopg

            return psycopg.connect(url, connect_timeout=5)

        return connect_pg
    if parts.scheme in ("mysql", "mariadb"):

        def connect_mysql() -> Any:
            import pymysql  # type: ignore[import-untyped]

            return pymysql.connect(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or 3306,
                user=parts.username or "root",
                password=parts.password or "",
                database=parts.path.lstrip("/") or None,
                connect_timeout=5,
            )

        return connect_mysql
    if parts.scheme == "sqlite":
        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else parts.path

        def connect_sqlite() -> Any:
            import sqlite3

            return sqlite3.connect(path, timeout=30, check_same_thread=False)

        return connect_sqlite
    raise ValueError(f"unsupported database URL {url!r} (postgresql://, mysql://, sqlite:///)")


class _DatabaseBackend:
    def __init__(
        self, connect: Callable[[], Any], dialect: str | None, table: str, where: str
    ) -> None:
        self._connect_fn = connect
        self.dialect = dialect
        self.table = _identifier(table)
        self.where = where
        self._conn: Any = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._after_fork_hooks: list[Callable[[], None]] = []

    # -- connection ----------------------------------------------------------------------
    def _connection(self) -> Any:
        if self._conn is not None:
            return self._conn
        conn = self._connect_fn()
        raw = getattr(conn, "driver_connection", None) or conn  # SQLAlchemy's proxy
        if self.dialect is None:
            module = type(raw).__module__.split(".")[0]
            if module not in _DIALECTS:
                raise ValueError(
                    f"cannot tell the SQL dialect of {type(raw).__name__} connections; "
                    "pass dialect='postgresql', 'mysql' or 'sqlite'"
                )
            self.dialect = _DIALECTS[module]
        if self.dialect == "sqlite":
            raw.isolation_level = None  # transactions are begun explicitly below
        elif self.dialect == "postgresql":
            if getattr(raw, "autocommit", False) is True:
                raw.autocommit = False
        elif callable(getattr(raw, "autocommit", None)):  # PyMySQL, mysqlclient
            raw.autocommit(False)
        self._conn = conn
        return conn

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def after_fork(self) -> None:
        # Closing would end the parent's session on the shared socket: just forget it.
        self._conn = None
        self._lock = threading.Lock()
        self._pid = os.getpid()
        for hook in self._after_fork_hooks:
            hook()

    def _run(self, work: Callable[[Any, str, str], Any]) -> Any:
        with self._lock:
            conn = self._connection()
            assert self.dialect is not None
            param = "?" if self.dialect == "sqlite" else "%s"
            try:
                cursor = conn.cursor()
                try:
                    if self.dialect == "sqlite":
                        cursor.execute("BEGIN IMMEDIATE")
                    result = work(cursor, param, _NOW_MS[self.dialect])
                finally:
                    cursor.close()
                conn.commit()
                return result
            except BaseException:
                with contextlib.suppress(Exception):
                    conn.rollback()
                self._discard()
                raise

    # -- operations ------------------------------------------------------------------------
    def create_table(self) -> None:
        def work(cursor: Any, p: str, now: str) -> None:
            assert self.dialect is not None
            cursor.execute(_DDL[self.dialect].format(t=self.table))

        self._run(work)

    def claim(self, name: str, token: str, maximum: int, ttl_ms: int) -> int | None:
        t = self.table

        def populate(cursor: Any, p: str, now: str) -> None:
            cursor.execute(
                f"SELECT COUNT(*) FROM {t} WHERE name = {p} AND node <= {p}", (name, maximum)
            )
            if cursor.fetchone()[0] > maximum:
                return
            insert = {
                "postgresql": "INSERT INTO {t} ({c}) VALUES ({v}) ON CONFLICT DO NOTHING",
                "mysql": "INSERT IGNORE INTO {t} ({c}) VALUES ({v})",
                "sqlite": "INSERT OR IGNORE INTO {t} ({c}) VALUES ({v})",
            }[self.dialect or ""]
            cursor.executemany(
                insert.format(
                    t=t, c="name, node, token, expires_ms, claimed_ms", v=f"{p}, {p}, NULL, 0, 0"
                ),
                [(name, node) for node in range(maximum + 1)],
            )

        def take(cursor: Any, p: str, now: str) -> int | None:
            lock = "" if self.dialect == "sqlite" else " FOR UPDATE SKIP LOCKED"
            cursor.execute(
                f"SELECT node FROM {t} WHERE name = {p} AND node <= {p} AND expires_ms < {now} "
                f"ORDER BY node LIMIT 1{lock}",
                (name, maximum),
            )
            row = cursor.fetchone()
            if row is None:
                return None
            node = int(row[0])
            cursor.execute(
                f"UPDATE {t} SET token = {p}, expires_ms = {now} + {p}, claimed_ms = {now} "
                f"WHERE name = {p} AND node = {p}",
                (token, ttl_ms, name, node),
            )
            return node

        self._run(populate)
        value: int | None = self._run(take)
        return value

    def renew(self, name: str, value: int, token: str, ttl_ms: int) -> bool:
        def work(cursor: Any, p: str, now: str) -> bool:
            cursor.execute(
                f"UPDATE {self.table} SET expires_ms = {now} + {p} WHERE name = {p} "
                f"AND node = {p} AND token = {p} AND expires_ms > {now}",
                (ttl_ms, name, value, token),
            )
            return bool(cursor.rowcount == 1)

        return bool(self._run(work))

    def release(self, name: str, value: int, token: str, hold_ms: int) -> None:
        def work(cursor: Any, p: str, now: str) -> None:
            cursor.execute(
                f"UPDATE {self.table} SET token = NULL, expires_ms = {now} + {p} "
                f"WHERE name = {p} AND node = {p} AND token = {p}",
                (hold_ms, name, value, token),
            )

        self._run(work)

    def unavailable(self, exc: BaseException) -> CoordinatorUnavailableError:
        return CoordinatorUnavailableError(
            f"cannot lease a worker id from {self.where} ({type(exc).__name__}: {exc}). "
            f"Check that the database is reachable and that the table {self.table} exists "
            "(Django: migrate the uid_fields app; otherwise DatabaseLease.create_table() or "
            f"DatabaseLease.sqlalchemy_table(metadata)); {_FALLBACKS}"
        )


class DatabaseLease(_Lease):
    """A node id leased from a table in PostgreSQL, MariaDB/MySQL or SQLite.

    ``connect`` is a URL (``postgresql://…``, ``mysql://…``, ``sqlite:///path``), a
    function returning a new DB-API connection, or a SQLAlchemy ``Engine``; in Django
    use ``DatabaseLease.for_django(alias, name)`` (the table comes with the app's
    migration). Rows ``(name, node)`` are created for the whole range on first use; a
    claim takes the lowest expired row with ``SELECT … FOR UPDATE SKIP LOCKED``
    (PostgreSQL, MariaDB >= 10.6, MySQL >= 8) or inside ``BEGIN IMMEDIATE`` (SQLite), and
    renewals are conditional UPDATEs on the token. Expiry is judged by the database's
    clock, so every host agrees on it.
    """

    def __init__(
        self,
        connect: str | Callable[[], Any] | Any,
        name: str,
        ttl: float = 10.0,
        *,
        margin: float | None = None,
        table: str = "uid_fields_worker_lease",
        dialect: str | None = None,
    ) -> None:
        where: str
        hooks: list[Callable[[], None]] = []
        if isinstance(connect, str):
            where = f"database {_redis.redact(connect)}"
            factory = _connect_url(connect)
            if dialect is None:
                dialect = _DIALECTS.get(
                    connect.split(":", 1)[0]
                    .replace("postgres", "postgresql")
                    .replace("postgresqlql", "postgresql")
                )
        elif hasattr(connect, "raw_connection") and hasattr(connect, "dialect"):
            engine: Any = connect  # SQLAlchemy Engine
            where = f"database {engine.url.render_as_string(hide_password=True)}"
            factory = engine.raw_connection
            dialect = dialect or _DIALECTS.get(engine.dialect.name)
            hooks.append(lambda: engine.dispose(close=False))
        elif callable(connect):
            factory = connect
            where = f"database from {getattr(connect, '__qualname__', repr(connect))}"
        else:
            raise TypeError(
                f"connect must be a database URL, a connection factory or a SQLAlchemy "
                f"Engine, got {connect!r}"
            )
        if dialect is not None and dialect not in _NOW_MS:
            raise ValueError(f"dialect must be one of {sorted(_NOW_MS)}, got {dialect!r}")
        self._backend = _DatabaseBackend(factory, dialect, table, where)
        self._backend._after_fork_hooks.extend(hooks)
        self.where = where
        super().__init__(self._backend, name, ttl, margin)

    @classmethod
    def for_django(
        cls,
        name: str,
        ttl: float = 10.0,
        *,
        database: str = "default",
        margin: float | None = None,
    ) -> DatabaseLease:
        """A lease over the ``uid_fields`` app's table in the Django database ``database``.

        It uses connections of its own (``get_new_connection``), so it neither joins nor
        disturbs the request's transaction.
        """

        def connect() -> Any:
            from django.db import connections

            wrapper = connections[database]
            return wrapper.get_new_connection(wrapper.get_connection_params())

        from django.db import connections

        vendor = connections[database].vendor
        lease = cls(connect, name, ttl, margin=margin, dialect=_DIALECTS.get(vendor))
        lease.where = lease._backend.where = f"Django database {database!r}"
        return lease

    def create_table(self) -> None:
        """Create the lease table if it does not exist (outside Django)."""
        self._backend.create_table()

    @staticmethod
    def sqlalchemy_table(metadata: Any, table: str = "uid_fields_worker_lease") -> Any:
        """The lease table as a SQLAlchemy ``Table`` in ``metadata`` (for Alembic)."""
        import sqlalchemy as sa

        return sa.Table(
            _identifier(table),
            metadata,
            sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
            sa.Column("name", sa.String(100), nullable=False),
            sa.Column("node", sa.Integer, nullable=False),
            sa.Column("token", sa.String(200), nullable=True),
            sa.Column("expires_ms", sa.BigInteger, nullable=False),
            sa.Column("claimed_ms", sa.BigInteger, nullable=False),
            sa.UniqueConstraint("name", "node", name=f"{table}_name_node"),
        )

    def __repr__(self) -> str:
        return f"DatabaseLease({self.where!r}, {self.name!r}, ttl={self.ttl:g})"
