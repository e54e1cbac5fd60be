"""Plain dicts -> generators, shard maps and leases, with every key validated.

One settings dict serves both ORMs: Django reads it from ``settings.UID_FIELDS`` and
reports its problems as system checks; both ORMs and plain Python build from it through
``UidConfig``, which raises ``ConfigurationError`` naming the key (and, at a generator's
first use, what the checks would refuse). So a project with both ORMs declares its
generators and shard maps once.

``validate`` is pure: it reads the dict and the clock, builds layouts (plain values),
and never makes a generator, so it never claims a lease or opens a connection. Every
problem names its key as a dotted path (``GENERATORS.orders.max_backward_ms``) and has a
stable code, the number of the Django check that reports it:

* ``E004`` a shard map that cannot work (no databases, duplicates, empty ranges ...)
* ``E005`` a generator option with a wrong value (unknown kind or layout, an epoch in
  the future, a node value out of range, a lease without a name ...)
* ``E013`` an unknown key (a typo: ``max_backwards_ms``, ``STRICT_ROUTNG``, ``databses``)
* ``E014`` a value of the wrong type or shape (``"STRICT_ROUTING": "no"``, a list where
  a dict is due, NaN where a finite number is due)
* ``E030`` public-id keys that cannot be used (a secret under 16 bytes, a version
  outside 0-31, an empty ``KEYS``)

The database lease is the one thing the core cannot build alone: its connections come
from the ORM. The adapters inject a factory (``database_lease=``) with the signature
``(name, ttl, *, database, margin) -> lease``.
"""

from .build import DatabaseLeaseFactory, Generator, build_generator
from .front import Memo, UidConfig, UnknownEntryError
from .layouts import build_layout, layout_of, static_node
from .problems import Problem, describe
from .schema import (
    KINDS,
    UNPROTECTED_WRITE_MODES,
    generator_problems,
    process_problems,
    process_safe,
    validate,
)
from .shard_maps import (
    build_shard_map,
    map_databases,
    replicas_of,
    route_of,
    shard_map_aliases,
    shard_map_of,
    shard_map_problems,
)

__all__ = [
    "KINDS",
    "UNPROTECTED_WRITE_MODES",
    "DatabaseLeaseFactory",
    "Generator",
    "Memo",
    "Problem",
    "UidConfig",
    "UnknownEntryError",
    "build_generator",
    "build_layout",
    "build_shard_map",
    "describe",
    "generator_problems",
    "layout_of",
    "map_databases",
    "process_problems",
    "process_safe",
    "replicas_of",
    "route_of",
    "shard_map_aliases",
    "shard_map_of",
    "shard_map_problems",
    "static_node",
    "validate",
]
