"""A node id leased from Redis: one key per id, ``SET NX PX`` to claim, Lua to compare.

Renewing extends the key's expiry only while it still holds this process's token (or
re-takes the id when the key is gone: see ``uid_fields.leases.state``); releasing sets
it ``margin`` ahead instead of deleting it, so a host whose clock lags ours cannot
reuse the id for times we already issued.

The coordinator's state is as old as the Redis process (``uptime_in_seconds``, read in
the claim script itself): a server restarted empty forgot every live key, so a claim in
its first ``ttl + margin`` is quarantined. A failover to a replica that missed recent
writes, ``FLUSHALL`` or key eviction also lose live keys but do not restart the server:
use one primary with ``maxmemory-policy noeviction`` and never flush the lease keys.
"""

from __future__ import annotations

from typing import Any

from ..._internal import redis as _redis
from ...clock import MonotonicClock
from ...errors import CoordinatorUnavailableError
from .state import FALLBACKS, QUARANTINED, Claimed, Lease

__all__ = ["RedisLease"]

# The lowest free id: SET NX PX on each key in turn, in one atomic call. A server up for
# less than the quarantine may have forgotten live keys: the token is stored quarantined
# and the script says how long to wait. Returns {id, wait_ms}; {-1, 0} when all are held.
_CLAIM = """
local info = redis.call('INFO', 'server')
local uptime_ms = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) * 1000
local wait = tonumber(ARGV[4]) - uptime_ms
local token = ARGV[1]
if wait > 0 then token = ARGV[5] .. token else wait = 0 end
local maximum = tonumber(ARGV[3])
for i = 0, maximum do
  if redis.call('SET', KEYS[1] .. i, token, 'NX', 'PX', ARGV[2]) then
    return {i, wait}
  end
end
return {-1, 0}
"""
# Renew: extend while we hold it; an active holder also re-takes a key that vanished and
# takes its id back from a quarantined claim. 1 when held afterwards, else 0.
_RENEW = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local q = ARGV[3]
if string.sub(ARGV[1], 1, #q) == q then return 0 end
if (not held) or string.sub(held, 1, #q) == q then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
# End a quarantine: the stored quarantined token becomes the plain one, if still ours.
_ACTIVATE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
# Release (expire in the margin): only the holder may.
_COMPARE_AND_EXPIRE = """
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
        self._claim: Any = client.register_script(_CLAIM)
        self._renew: Any = client.register_script(_RENEW)
        self._activate: Any = client.register_script(_ACTIVATE)
        self._expire_if_held: Any = client.register_script(_COMPARE_AND_EXPIRE)
        self.client = client

    def key(self, name: str, value: int | str) -> str:
        return f"{self.prefix}{name}:{value}"

    def claim(
        self, name: str, token: str, maximum: int, ttl_ms: int, quarantine_ms: int
    ) -> Claimed | None:
        args = [token, ttl_ms, maximum, quarantine_ms, QUARANTINED]
        value, wait_ms = (int(x) for x in self._claim(keys=[self.key(name, "")], args=args))
        if value < 0:
            return None
        return Claimed(value, QUARANTINED + token if wait_ms > 0 else token, wait_ms)

    def renew(self, name: str, value: int, stored: str, ttl_ms: int) -> bool:
        args = [stored, ttl_ms, QUARANTINED]
        return bool(self._renew(keys=[self.key(name, value)], args=args))

    def activate(self, name: str, value: int, stored: str, token: str, ttl_ms: int) -> bool:
        return bool(self._activate(keys=[self.key(name, value)], args=[stored, token, ttl_ms]))

    def release(self, name: str, value: int, stored: str, hold_ms: int) -> None:
        self._expire_if_held(keys=[self.key(name, value)], args=[stored, hold_ms])

    def after_fork(self) -> None:
        self._connect()

    def unavailable(self, exc: BaseException) -> CoordinatorUnavailableError:
        return _redis.unavailable(self.url, exc, "a worker id lease", FALLBACKS)


class RedisLease(Lease):
    """A node id leased from Redis.

    ``SnowflakeGenerator(TWITTER, datacenter=0, worker=RedisLease(url, "orders", ttl=10))``

    Claims the lowest free id of the field (keys ``<prefix><name>:<id>``, ``SET NX PX``),
    renews it every ``ttl / 3`` with a compare-and-expire script, and fences the
    generator ``margin`` seconds before the key could expire. A forked child claims an
    id of its own. ``clock``: the monotonic clock of its deadlines and pauses (a
    ``ManualMonotonicClock`` in tests). Redis must not lose keys while they are live (a
    single primary; with replication, a failover can forget a just-claimed key).
    """

    def __init__(
        self,
        url: str,
        name: str,
        ttl: float = 10.0,
        *,
        margin: float | None = None,
        prefix: str = "uid_fields:lease:",
        clock: MonotonicClock | None = None,
    ) -> None:
        timeout = min(5.0, max(0.05, float(ttl) / 3))
        self.url = url
        self._backend = _RedisBackend(url, prefix, timeout)
        super().__init__(self._backend, name, ttl, margin, clock)

    def key(self, value: int) -> str:
        """The Redis key of id ``value``."""
        return self._backend.key(self.name, value)

    def __repr__(self) -> str:
        return f"RedisLease({_redis.redact(self.url)!r}, {self.name!r}, ttl={self.ttl:g})"
