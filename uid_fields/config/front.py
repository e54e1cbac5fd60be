"""The one front-end: ``UidConfig`` validates a settings dict once, then builds each
generator and shard map once per name (``Memo``). Django's settings go through it too
(``uid_fields.django.conf``), so what the system checks refuse is refused at first use
in both ORMs, where no check runs (a WSGI worker).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any, Generic, TypeVar

from ..errors import ConfigurationError, UnknownEntryError
from ..ids.public import Kind, PublicIds
from ..placement import ShardMap
from .build import DatabaseLeaseFactory, Generator, build_generator
from .problems import Problem, describe
from .public_ids import build_public_ids
from .schema import process_problems, validate_all
from .shard_maps import shard_map_of

__all__ = ["Memo", "UidConfig", "UnknownEntryError"]


K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V], Generic[K, V]):
    """A dict whose missing values are built once, under a lock.

    One generator per name per process: two generators of one name would each start
    their sequence at 0 and repeat each other's ids.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def build(self, key: K, make: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            with self._lock:
                value = self.get(key)
                if value is None:
                    value = make()
                    self[key] = value
        return value


def _refusal(problems: Collection[Problem]) -> str:
    """The message of a generator refused at first use: each problem with its key and the
    system check that reports it (``manage.py check`` names the same)."""
    return describe(
        [Problem(p.path, f"{p.message} (check uid_fields.{p.code})", p.code) for p in problems]
    )


class UidConfig:
    """Generators and shard maps from one settings dict, for both ORMs and plain Python.

    ``config = UidConfig(UID_FIELDS)`` validates the whole dict at once and raises
    ``ConfigurationError`` naming every wrong key. ``config.generator("orders")`` builds
    a generator on first use (claiming its leases then, not before) and returns the
    same object afterwards; ``config.shard_map("main", "orders")`` routes that
    generator's ids. A ``{"lease": "database", "database": "<name>"}`` node value
    needs ``database_lease=``, for example
    ``uid_fields.sqlalchemy.lease_factory({"default": engine})``.

    A generator whose Python-made ids would collide across processes (E016) is refused
    at its first use, unless its name is in ``database_made``: generators whose ids
    only a database makes (``database_default``), used here to decode and route them.
    """

    def __init__(
        self,
        settings: object,
        *,
        database_lease: DatabaseLeaseFactory | None = None,
        database_made: Collection[str] = (),
    ) -> None:
        problems = validate_all(settings, now_ms=None, database_leases=database_lease is not None)
        if problems:
            raise ConfigurationError(describe(problems))
        assert isinstance(settings, Mapping)
        self.settings: Mapping[str, Any] = settings
        self._database_lease = database_lease
        self._database_made = frozenset(database_made)
        self._generators: Memo[str, Generator] = Memo()
        self._shard_maps: Memo[tuple[str, str], ShardMap] = Memo()
        self._public_ids: Memo[tuple[str, Kind | None], PublicIds] = Memo()

    def _entry(self, section: str, name: str) -> Mapping[str, Any]:
        entries: Mapping[str, Mapping[str, Any]] = self.settings.get(section, {})
        try:
            return entries[name]
        except KeyError:
            what = "generator" if section == "GENERATORS" else "shard map"
            raise UnknownEntryError(
                f"{section}.{name}: no such entry (no {what} {name!r}; configured: "
                f"{sorted(entries)})"
            ) from None

    def generator(self, name: str) -> Generator:
        """The process-wide generator of ``GENERATORS[name]``.

        ``UnknownEntryError`` for a name not configured. A sharded generator whose ids
        would collide across processes (E016) is refused with a ``ConfigurationError``
        naming the key and the check, at every call: built here it makes ids in Python.
        """
        built = self._generators.get(name)
        if built is not None:
            return built

        def make() -> Generator:
            entry = self._entry("GENERATORS", name)
            if name not in self._database_made:
                problems = process_problems(name, entry)
                if problems:
                    raise ConfigurationError(_refusal(problems))
            return build_generator(name, entry, database_lease=self._database_lease)

        return self._generators.build(name, make)

    def built_generator(self, name: str) -> Generator | None:
        """The generator of ``name`` if it was built already; builds nothing."""
        return self._generators.get(name)

    def shard_map(self, shards: str, generator: str) -> ShardMap:
        """The shard map ``SHARDS[shards]`` as the ids of generator ``generator`` route."""

        def make() -> ShardMap:
            config = self._entry("SHARDS", shards)
            try:
                return shard_map_of(config, self._entry("GENERATORS", generator))
            except (ValueError, TypeError) as exc:
                if isinstance(exc, ConfigurationError):
                    raise
                raise ConfigurationError(
                    f"SHARDS.{shards}: does not fit the ids of generator {generator!r}: {exc}"
                ) from exc

        return self._shard_maps.build((shards, generator), make)

    def public_ids(self, prefix: str, *, kind: Kind | None = None) -> PublicIds:
        """The public-id codec of ``prefix`` with the keys of ``PUBLIC_IDS["KEYS"]``
        (one per prefix and kind, made at first use). A ``ConfigurationError`` saying
        what to set when no keys are configured, or when the prefix is malformed."""
        return self._public_ids.build(
            (prefix, kind), lambda: build_public_ids(self.settings, prefix, kind)
        )

    def __repr__(self) -> str:
        generators = sorted(self.settings.get("GENERATORS", {}))
        shards = sorted(self.settings.get("SHARDS", {}))
        return f"<UidConfig generators={generators} shards={shards}>"
