"""Generators built from entries that validated: node values, leases, sequences. A build
refuses what validation reports, so a worker process that runs no system check still never
builds a generator the checks refuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigurationError
from ..ids.generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from ..ids.layouts import DecimalLayout, SnowflakeLayout
from ..ids.leases import RedisLease
from ..ids.locality import LocalityUUIDGenerator
from ..ids.nodes import FromEnv, NodeSource, NodeValue
from ..ids.sequences import RedisSequence
from ..ids.uniqid import UniqIdGenerator
from .layouts import build_layout
from .problems import describe
from .schema import generator_problems

Generator = (
    SnowflakeGenerator
    | ShardedIdGenerator
    | DecimalGenerator
    | LocalityUUIDGenerator
    | UniqIdGenerator
)


#: ``(name, ttl, *, database, margin) -> lease``: how an adapter makes a database lease.
DatabaseLeaseFactory = Callable[..., NodeSource]


def _node_source(config: object, database_lease: DatabaseLeaseFactory | None) -> NodeValue:
    if not isinstance(config, Mapping):
        return config  # type: ignore[return-value]  # an int (validated)
    if "env" in config:
        return FromEnv(config["env"])
    ttl = config.get("ttl", 10.0)
    margin = config.get("margin")
    if config["lease"] == "redis":
        return RedisLease(
            config["url"],
            config["name"],
            ttl,
            margin=margin,
            prefix=config.get("prefix", "uid_fields:lease:"),
        )
    assert database_lease is not None  # validated
    return database_lease(
        config["name"], ttl, database=config.get("database", "default"), margin=margin
    )


def build_generator(
    name: str,
    config: object,
    *,
    database_lease: DatabaseLeaseFactory | None = None,
) -> Generator:
    """The generator a ``GENERATORS`` entry describes.

    ``ConfigurationError`` names every wrong key. Making the generator connects to
    nothing: its leases claim at its first id, so settings build where Redis or the
    lease table is not there yet (a build step). Each build makes new leases, which each
    claim an id of their own: call this once per name and process (``UidConfig`` and
    Django do).
    """
    problems = generator_problems(name, config, database_leases=database_lease is not None)
    if problems:
        raise ConfigurationError(describe(problems))
    assert isinstance(config, Mapping)
    kind = config["kind"]
    options: dict[str, Any] = {}
    if "max_backward_ms" in config:
        options["max_backward_ms"] = config["max_backward_ms"]
    fields: dict[str, Any] = {
        k: _node_source(v, database_lease) for k, v in config.get("fields", {}).items()
    }
    if config.get("sequence") is not None:
        spec = config["sequence"]
        options["sequence"] = RedisSequence(
            spec["redis"],
            mode=spec.get("mode", "uid_fields"),
            prefix=spec.get("prefix"),
            key_ttl_ms=spec.get("key_ttl_ms", 10_000),
        )
    if kind == "locality":
        return LocalityUUIDGenerator(
            sequential=config.get("sequential", False),
            pid=config.get("pid"),
            mac=config.get("mac"),
        )
    if kind == "uniqid":
        return UniqIdGenerator(config.get("total_shards", 4), **options)
    if kind == "decimal":
        options.pop("sequence", None)  # not a key of decimal generators (validated above)
    layout = build_layout(config, kind)
    if isinstance(layout, DecimalLayout):
        return DecimalGenerator(layout, server=fields.pop("server", 0), **options)
    assert isinstance(layout, SnowflakeLayout)
    if kind == "sharded":
        return ShardedIdGenerator(
            layout,
            shard_field=config.get("shard_field", "shard"),
            key_hash=config.get("key_hash"),
            **options,
            **fields,
        )
    return SnowflakeGenerator(layout, **options, **fields)
