"""Redis plumbing shared by the Redis lease and the Redis sequence (redis-py, imported lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CoordinatorUnavailableError
from .extras import missing
from .redact import redact as redact_text
from .redact import redact_url

if TYPE_CHECKING:
    import redis

__all__ = ["connection_errors", "redact", "redis_client", "unavailable"]


def redact(url: str) -> str:
    """The URL without its password or credential parameters, for messages and reprs."""
    return redact_url(url)


def redis_client(url: str, timeout: float) -> redis.Redis:
    """A client that fails fast (no retries): callers decide what a failure means."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installation
        raise missing("redis", exc) from exc
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def connection_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def unavailable(
    url: str, exc: BaseException, what: str, fallback: str
) -> CoordinatorUnavailableError:
    """The error raised when the Redis server at ``url`` cannot be reached."""
    return CoordinatorUnavailableError(
        f"cannot reach Redis at {redact(url)} for {what} "
        f"({type(exc).__name__}: {redact_text(str(exc))}). "
        f"Start it or fix the URL; {fallback}"
    )
