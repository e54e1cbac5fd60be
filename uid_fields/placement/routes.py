"""Routes: how a generator's ids name a logical shard, and whether a shard map's route
can read a generator's ids at all. Decided here once for both ORMs.
"""

from __future__ import annotations

from typing import Literal

from ..ids.generators import DecimalGenerator, ShardedIdGenerator, SnowflakeGenerator
from ..ids.layouts import DecimalLayout, IntLayout, SnowflakeLayout
from ..ids.locality import LocalityUUIDGenerator
from ..ids.uniqid import UniqIdGenerator
from .shards import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    ByUniqIdDigit,
    Route,
)

IdKind = Literal["snowflake", "sharded", "decimal", "locality", "uniqid"]


def natural_route(
    kind: IdKind,
    layout: IntLayout | None = None,
    *,
    by: str | None = None,
    logical_shards: int = 1024,
    shard_field: str = "shard",
    total_shards: int = 4,
) -> Route:
    """The route ids of a kind and layout take, from their description alone.

    Sharded ids route by their shard field, uniqids by their shard digit, decimal ids
    by their server digits, locality UUIDs by their counter block, snowflakes by the
    mixed modulo; ``by`` names a node field to route on instead (a datacenter, say).
    Settings checks use this without building a generator (which may claim a lease).
    """
    if by is not None:
        if not isinstance(layout, SnowflakeLayout):
            raise ValueError(f"by={by!r} needs a snowflake layout, not a {kind} generator")
        return ByField(layout, by)
    if kind == "uniqid":
        return ByUniqIdDigit(total_shards)
    if kind == "locality":
        return ByLocalityBlock(logical_shards)
    if kind == "sharded":
        if not isinstance(layout, SnowflakeLayout):
            raise ValueError("sharded ids need a snowflake layout")
        return ByField(layout, shard_field)
    if not isinstance(layout, (SnowflakeLayout, DecimalLayout)):
        raise ValueError(f"{kind} ids need an integer layout")
    if isinstance(layout, DecimalLayout) and layout.server_digits:
        return ByDecimalServer(layout)
    return ByModulo(logical_shards, max_value=layout.max_value)


def route_for(generator: object, by: str | None = None, logical_shards: int = 1024) -> Route:
    """The natural route of a generator's ids (see ``natural_route``)."""
    if isinstance(generator, ShardedIdGenerator):
        return natural_route("sharded", generator.layout, by=by, shard_field=generator.shard_field)
    if isinstance(generator, UniqIdGenerator):
        return natural_route("uniqid", by=by, total_shards=generator.total_shards)
    if isinstance(generator, LocalityUUIDGenerator):
        return natural_route("locality", by=by, logical_shards=logical_shards)
    if isinstance(generator, DecimalGenerator):
        return natural_route("decimal", generator.layout, by=by, logical_shards=logical_shards)
    if isinstance(generator, SnowflakeGenerator):
        return natural_route("snowflake", generator.layout, by=by, logical_shards=logical_shards)
    raise TypeError(f"no route for {generator!r}")


def route_fits(route: Route, generator: object) -> str | None:
    """Why ``route`` cannot read the ids of ``generator``, or None when it can.

    A map that reads Instagram's shard bits sends Twitter snowflakes by their worker
    and sequence bits, so a map is only usable for the ids it was made for.
    """
    layout = getattr(generator, "layout", None)
    if isinstance(route, ByField):
        if not isinstance(layout, SnowflakeLayout) or route.field not in layout.field_names:
            return (
                f"it reads the {route.field!r} bits of {route.layout!r}, which {generator!r} lacks"
            )
        ours = (layout.field_shift(route.field), layout.field_bits(route.field))
        theirs = (route.layout.field_shift(route.field), route.layout.field_bits(route.field))
        if ours != theirs:
            return (
                f"it reads the {route.field!r} bits at another position than {generator!r} "
                "writes them"
            )
        return None
    if isinstance(route, ByModulo):
        if isinstance(generator, (LocalityUUIDGenerator, UniqIdGenerator)):
            return f"it takes a modulo of integer ids, and {generator!r} makes no integers"
        return None
    if isinstance(route, ByDecimalServer):
        if not isinstance(generator, DecimalGenerator) or (
            generator.layout.server_scale != route.layout.server_scale
        ):
            return f"it reads the server digits of decimal ids, which {generator!r} lacks"
        return None
    if isinstance(route, ByLocalityBlock):
        if not isinstance(generator, LocalityUUIDGenerator):
            return f"it reads locality UUIDs, which {generator!r} does not make"
        return None
    if isinstance(route, ByUniqIdDigit):
        if not isinstance(generator, UniqIdGenerator) or (
            generator.total_shards != route.logical_shards
        ):
            return f"it reads the shard digit of uniqids over {route.logical_shards} shards"
        return None
    return None  # a route of the user's own: trusted
