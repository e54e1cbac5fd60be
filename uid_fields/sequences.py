"""Where a snowflake sequence comes from: this process (the default) or Redis.

The default sequence lives in the generator: it hands out the whole sequence range of a
time unit from a precomputed block, with no I/O. ``RedisSequence`` is the PHP+Redis
design: the sequence of each (node, time unit) is a Redis counter, so any number of
processes can share one node id. One Lua call does ``INCRBY`` + ``PEXPIRE``; a counter
that reaches ``2**sequence_bits`` makes the generator wait for the next time unit. (The
PHP original compared with ``>`` instead of ``>=`` and let sequence 4096 bleed into the
worker bits.) ``next_ids(n)`` reserves its ``n`` ids with one ``INCRBY n``.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from . import _redis

if TYPE_CHECKING:
    import redis

__all__ = ["RedisSequence", "SequenceSource"]


@runtime_checkable
class SequenceSource(Protocol):
    """A source of sequence numbers per (id space, time unit)."""

    #: True when processes that share a node id stay unique through this source, so a
    #: forked child may keep its parent's node id.
    shared: bool

    def reserve(self, space: str, unit: int, count: int, limit: int) -> range:
        """Up to ``count`` unused sequence numbers of ``unit``, all below ``limit``.

        ``space`` names the node (layout and node bits). An empty range means that the
        unit's sequence is used up: wait for the next unit.
        """
        ...


# INCRBY and PEXPIRE in one atomic call: the counter of a (node, unit) never outlives
# its TTL without one, and no other client sees it half-made.
_RESERVE = """
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return value
"""


class RedisSequence:
    """Sequence numbers from Redis, shared by every process with the same node id.

    ``SnowflakeGenerator(TWITTER, worker=3, sequence=RedisSequence(url))``

    ``key_ttl_ms`` keeps each unit's counter alive long enough for the slowest clock
    among the processes that share the node: a process whose clock lags by more than
    that would find the counter gone and start again at 0. Keep the clocks within it
    (NTP does, by orders of magnitude) or raise it.
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "uid_fields:seq:",
        key_ttl_ms: int = 10_000,
        timeout: float = 5.0,
    ) -> None:
        if key_ttl_ms < 1:
            raise ValueError(f"key_ttl_ms must be >= 1, got {key_ttl_ms}")
        self.url = url
        self.prefix = prefix
        self.key_ttl_ms = int(key_ttl_ms)
        self.timeout = timeout
        self.round_trips = 0
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._client = _redis.redis_client(url, timeout)
        self._script: Any = self._client.register_script(_RESERVE)
        try:
            self._client.ping()
        except _redis.connection_errors() as exc:
            raise _redis.unavailable(url, exc, "the shared sequence", self._fallback()) from exc

    @staticmethod
    def _fallback() -> str:
        return (
            "or drop sequence= to use the in-process sequence with a node id of its own "
            "per process (worker=RedisLease(...), DatabaseLease(...) or an int per process)"
        )

    def _client_for_pid(self) -> redis.Redis:
        if os.getpid() != self._pid:  # a forked child: never share the parent's sockets
            with self._lock:
                if os.getpid() != self._pid:
                    self._client = _redis.redis_client(self.url, self.timeout)
                    self._script = self._client.register_script(_RESERVE)
                    self._pid = os.getpid()
        return self._client

    def key(self, space: str, unit: int) -> str:
        return f"{self.prefix}{space}:{unit}"

    def reserve(self, space: str, unit: int, count: int, limit: int) -> range:
        count = max(1, count)
        self._client_for_pid()
        try:
            after = int(self._script(keys=[self.key(space, unit)], args=[count, self.key_ttl_ms]))
        except _redis.connection_errors() as exc:
            raise _redis.unavailable(
                self.url, exc, "the shared sequence", self._fallback()
            ) from exc
        self.round_trips += 1
        first = after - count  # sequence numbers first .. after-1 are ours
        # ``>=``: sequence ``limit`` (4096 for 12 bits) would carry into the node bits.
        if first >= limit:
            return range(0)
        return range(first, min(after, limit))

    def __repr__(self) -> str:
        return f"RedisSequence({_redis.redact(self.url)!r})"
