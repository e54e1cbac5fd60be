"""Where a snowflake sequence comes from: this process (the default) or Redis.

The default sequence lives in the generator: it hands out the whole sequence range of a
time unit from a precomputed block, with no I/O. ``RedisSequence`` is the PHP+Redis
design: the sequence of each (node, time unit) is a Redis counter, so any number of
processes can share one node id. One Lua call does ``INCRBY`` + ``PEXPIRE``; a counter
that reaches ``2**sequence_bits`` makes the generator wait for the next time unit. (The
PHP original compared with ``>`` instead of ``>=`` and let sequence 4096 bleed into the
worker bits.) ``next_ids(n)`` reserves its ``n`` ids with one ``INCRBY n``, and a single
id a block of ``block`` (8) that the generator hands out until its unit ends.

``RedisSequence(url, mode="php")`` joins a running fleet of the PHP+Redis generators:
the same Redis keys (the id without its sequence, in decimal) and the same counters
(the first sequence of a millisecond is 1), so a Python process and PHP processes with
the same server and worker values share each millisecond's counter instead of both
starting it. What it does not copy from the original: sequence 4096 is never used, the
counter's expiry is never shortened, and a counter that may have expired (its
millisecond is already over by the Redis server's clock) is never started again.

Logged on ``uid_fields.sequences`` (docs/logging.md): every call that cannot reach Redis
(WARNING, then ``CoordinatorUnavailableError``), and units refused because this
process's clock is behind the Redis server's (WARNING, at most once a minute).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .._internal import redis as _redis
from .._internal.validate import shown
from ..errors import ClockMovedBackwardsError

if TYPE_CHECKING:
    import redis

__all__ = ["RedisSequence", "SequenceMode", "SequenceSource"]

log = logging.getLogger("uid_fields.sequences")

#: Refused units are logged at most this often (seconds) per sequence: a clock behind
#: Redis's refuses one unit after another until it catches up.
_LATE_LOG_EVERY_S = 60.0

#: ``"uid_fields"``: this library's keys (``uid_fields:seq:<node>:<unit>``, first
#: sequence 0); ``"php"``: the PHP+Redis original's keys and counters.
SequenceMode = Literal["uid_fields", "php"]
MODES: tuple[SequenceMode, ...] = ("uid_fields", "php")

#: Sequence numbers a reservation takes at least (``block=``): a burst of single ids costs
#: one round trip per 8 ids, and a unit left with part of its block unused wastes at most
#: 7 sequence numbers of that unit per generator. ``mode="php"`` takes 1 by default, as
#: the PHP processes sharing its counters do.
DEFAULT_BLOCK = 8

#: The longest ``key_ttl_ms``: a day. A unit's counter need only outlive the clock lag
#: between the processes sharing it (milliseconds under NTP); a key kept longer only
#: holds Redis memory, and Redis refuses expiry times past a signed 64-bit ms count.
MAX_KEY_TTL_MS = 86_400_000


@runtime_checkable
class SequenceSource(Protocol):
    """A source of sequence numbers per (id space, time unit)."""

    #: True when processes that share a node id stay unique through this source, so a
    #: forked child may keep its parent's node id.
    shared: bool

    def reserve(
        self, space: str, unit: int, count: int, limit: int, *, base: int = 0, last_ms: int = 0
    ) -> range:
        """Up to ``count`` unused sequence numbers of ``unit``, all below ``limit``.

        ``space`` names the node (layout and node bits); ``base`` is the unit's first id
        (its sequence 0) and ``last_ms`` the unit's last Unix millisecond, for sources
        that key or guard by them. An empty range means that the unit's sequence is used
        up: wait for the next unit.
        """
        ...


# INCRBY and PEXPIRE in one atomic call: the counter of a (node, unit) never outlives
# its TTL without one, and no other client sees it half-made.
_RESERVE = """
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return value
"""


# The PHP original's call is INCR + PEXPIRE 1 on the key "<id without sequence>". This
# one adds: count ids at once; an expiry never shortened below ARGV[2]; and a key that is
# missing while its unit (last ms ARGV[3]) is already over by the server's clock is not
# started again, since a PHP process may have used and let expire it. It answers the
# refusal as -(ms the unit is over by).
_RESERVE_PHP = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  local now = redis.call('TIME')
  local late = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - tonumber(ARGV[3])
  if late > 0 then return -late end
end
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return value
"""


class RedisSequence:
    """Sequence numbers from Redis, shared by every process with the same node id.

    ``SnowflakeGenerator(TWITTER, worker=3, sequence=RedisSequence(url))``

    ``key_ttl_ms`` keeps each unit's counter alive long enough for the slowest clock
    among the processes that share the node: a process whose clock lags by more than
    that would find the counter gone and start again at 0. Keep the clocks within it
    (NTP does, by orders of magnitude) or raise it.

    ``mode="php"`` shares the counters of a PHP+Redis fleet (module docstring): keys are
    ``prefix`` (empty by default) plus the decimal id without its sequence, sequences
    start at 1. This process's clock must agree with the Redis server's: a unit that is
    more than ``max_lag_ms`` over by the server's clock when its counter does not exist
    yet raises ``ClockMovedBackwardsError`` instead of waiting.
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        mode: SequenceMode = "uid_fields",
        prefix: str | None = None,
        key_ttl_ms: int = 10_000,
        timeout: float = 5.0,
        max_lag_ms: int = 1000,
        block: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, got {prefix!r}")
        if not 1 <= key_ttl_ms <= MAX_KEY_TTL_MS:
            raise ValueError(f"key_ttl_ms must be 1..{MAX_KEY_TTL_MS}, got {shown(key_ttl_ms)}")
        if max_lag_ms < 1:
            raise ValueError(f"max_lag_ms must be >= 1, got {max_lag_ms}")
        if block is None:
            block = 1 if mode == "php" else DEFAULT_BLOCK  # PHP's fleet counts one by one
        if not isinstance(block, int) or isinstance(block, bool) or not 1 <= block <= 4096:
            raise ValueError(f"block must be an int from 1 to 4096, got {shown(block)}")
        self.url = url
        #: Sequence numbers taken per call at least: a process building objects one by
        #: one holds the rest of its unit's block and makes no round trip for them.
        self.block = block
        self.mode: SequenceMode = mode
        if prefix is None:
            prefix = "" if mode == "php" else "uid_fields:seq:"
        self.prefix = prefix
        self.key_ttl_ms = int(key_ttl_ms)
        self.max_lag_ms = int(max_lag_ms)
        self.timeout = timeout
        self.round_trips = 0
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._client = _redis.redis_client(url, timeout)
        self._source = _RESERVE_PHP if mode == "php" else _RESERVE
        self._script: Any = self._client.register_script(self._source)
        self._late_logged_at: float | None = None
        self._late_count = 0
        try:
            self._client.ping()
        except _redis.connection_errors() as exc:
            raise self._unavailable(exc) from exc

    @staticmethod
    def _fallback() -> str:
        return (
            "or drop sequence= to use the in-process sequence with a node id of its own "
            "per process (worker=RedisLease(...), DatabaseLease(...) or an int per process)"
        )

    def _unavailable(self, exc: BaseException) -> Exception:
        """The error to raise when Redis cannot be reached, logged (WARNING) first."""
        error = _redis.unavailable(self.url, exc, "the shared sequence", self._fallback())
        log.warning("%s: no ids: %s", self, error)
        return error

    def _refused_late(self, late_ms: int) -> None:
        """Log (WARNING, at most once a minute) that units are refused: this process's
        clock is behind Redis's, so the generator falls back to later units."""
        self._late_count += 1
        now = time.monotonic()
        if self._late_logged_at is not None and now - self._late_logged_at < _LATE_LOG_EVERY_S:
            return
        log.warning(
            "%s: this process's clock is %d ms behind the Redis server (within "
            "max_lag_ms=%d): %d unit(s) refused since the last report, the generator waits "
            "for later ones; run NTP on both",
            self,
            late_ms,
            self.max_lag_ms,
            self._late_count,
        )
        self._late_logged_at, self._late_count = now, 0

    def _client_for_pid(self) -> redis.Redis:
        if os.getpid() != self._pid:  # a forked child: never share the parent's sockets
            with self._lock:
                if os.getpid() != self._pid:
                    self._client = _redis.redis_client(self.url, self.timeout)
                    self._script = self._client.register_script(self._source)
                    self._pid = os.getpid()
        return self._client

    def key(self, space: str, unit: int, base: int = 0) -> str:
        """The Redis key of a unit's counter (``base``: the unit's id with sequence 0)."""
        if self.mode == "php":
            return f"{self.prefix}{base}"
        return f"{self.prefix}{space}:{unit}"

    def reserve(
        self, space: str, unit: int, count: int, limit: int, *, base: int = 0, last_ms: int = 0
    ) -> range:
        count = max(1, count, self.block)
        self._client_for_pid()
        key = self.key(space, unit, base)
        try:
            after = int(self._script(keys=[key], args=[count, self.key_ttl_ms, last_ms]))
        except _redis.connection_errors() as exc:
            raise self._unavailable(exc) from exc
        self.round_trips += 1
        if self.mode == "php":
            if after < 0:  # the unit is over by the server's clock and its counter is gone
                if -after > self.max_lag_ms:
                    log.warning(
                        "%s: this process's clock is %d ms behind the Redis server, more "
                        "than max_lag_ms=%d: no ids (ClockMovedBackwardsError)",
                        self,
                        -after,
                        self.max_lag_ms,
                    )
                    raise ClockMovedBackwardsError(
                        -after,
                        self.max_lag_ms,
                        f"this process's clock is {-after} ms behind the Redis server at "
                        f"{_redis.redact(self.url)}, more than max_lag_ms={self.max_lag_ms}: "
                        "mode='php' needs the clocks of the fleet and of Redis to agree "
                        "(run NTP on both)",
                    )
                self._refused_late(-after)
                return range(0)
            after += 1  # PHP's first sequence is 1: counter value v is sequence v
        first = after - count  # sequence numbers first .. after-1 are ours
        # ``>=``: sequence ``limit`` (4096 for 12 bits) would carry into the node bits.
        if first >= limit:
            return range(0)
        return range(first, min(after, limit))

    def __repr__(self) -> str:
        mode = ", mode='php'" if self.mode == "php" else ""
        return f"RedisSequence({_redis.redact(self.url)!r}{mode})"
