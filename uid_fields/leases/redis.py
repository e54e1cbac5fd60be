"""A node id leased from Redis: one key per id, ``SET NX PX`` to claim, Lua to compare.

Renew and release are the same operation, compare-and-expire: extend the key's expiry
only while it still holds this process's token. Renewing sets it ``ttl`` ahead;
releasing sets it ``margin`` ahead instead of deleting it, so a host whose clock lags
ours cannot reuse the id for times we already issued.
"""

from __future__ import annotations

from typing import Any

from .. import _redis
from ..errors import CoordinatorUnavailableError
from .state import FALLBACKS, Lease

__all__ = ["RedisLease"]

# The lowest free id: SET NX PX on each key in turn, in one atomic call.
_CLAIM = """
local maximum = tonumber(ARGV[3])
for i = 0, maximum do
  if redis.call('SET', KEYS[1] .. i, ARGV[1], 'NX', 'PX', ARGV[2]) then
    return i
  end
end
return -1
"""
# Renew (expire in ttl) and release (expire in the margin): only the holder may.
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
        self._expire_if_held: Any = client.register_script(_COMPARE_AND_EXPIRE)
        self.client = client

    def key(self, name: str, value: int | str) -> str:
        return f"{self.prefix}{name}:{value}"

    def claim(self, name: str, token: str, maximum: int, ttl_ms: int) -> int | None:
        value = int(self._claim(keys=[self.key(name, "")], args=[token, ttl_ms, maximum]))
        return None if value < 0 else value

    def renew(self, name: str, value: int, token: str, ttl_ms: int) -> bool:
        return bool(self._expire_if_held(keys=[self.key(name, value)], args=[token, ttl_ms]))

    def release(self, name: str, value: int, token: str, hold_ms: int) -> None:
        self._expire_if_held(keys=[self.key(name, value)], args=[token, hold_ms])

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
