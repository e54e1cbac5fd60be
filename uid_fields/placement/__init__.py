"""Placement: which logical shard, and so which database, every row gets.

Shard maps (``shards``), the routes that read a logical shard from an id (``routes``),
shard keys and co-location (``keys``), the placement authority adapters call for every
row (``authority``), families of models placed through a chain of keys up to one root
and what a relation between two models joins (``families``), the rule for ids a caller
chose, on new objects and on stored rows (``new_objects``), ranges named by an attribute
of the application (``key_ranges``) and the SQL range predicates of a shard
(``predicates``). Built on ``uid_fields.ids``; knows no ORM and no settings.
"""

from .authority import KeyHash, Placement, allow_off_shard_writes, off_shard_writes_allowed
from .families import (
    Relation,
    check_family_key,
    family_chain,
    family_root,
    relation_between,
)
from .key_ranges import KeyRanges
from .keys import (
    colocated_logical_shard,
    logical_shard_in,
    normalize_shard_key,
    scaled_logical_shard,
    stamped_logical_shard,
)
from .new_objects import NewId, check_id_change, id_for_new_object, ids_for_new_objects
from .routes import natural_route, route_fits, route_for
from .shards import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    ByUniqIdDigit,
    Route,
    ShardMap,
)

__all__ = [
    "ByDecimalServer",
    "ByField",
    "ByLocalityBlock",
    "ByModulo",
    "ByUniqIdDigit",
    "KeyHash",
    "KeyRanges",
    "NewId",
    "Placement",
    "Relation",
    "Route",
    "ShardMap",
    "allow_off_shard_writes",
    "check_family_key",
    "check_id_change",
    "colocated_logical_shard",
    "family_chain",
    "family_root",
    "id_for_new_object",
    "ids_for_new_objects",
    "logical_shard_in",
    "natural_route",
    "normalize_shard_key",
    "off_shard_writes_allowed",
    "relation_between",
    "route_fits",
    "route_for",
    "scaled_logical_shard",
    "stamped_logical_shard",
]
