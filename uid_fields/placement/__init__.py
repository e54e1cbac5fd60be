"""Placement: which logical shard, and so which database, every row gets.

Shard maps (``shards``), the routes that read a logical shard from an id (``routes``),
shard keys and co-location (``keys``), the placement authority adapters call for every
row (``authority``), families of models placed through a chain of keys up to one root
and what a relation between two models joins (``families``), the rule for ids a caller
chose, on new objects and on stored rows (``new_objects``), which unique sets the
databases enforce and which databases a uniqueness check reads (``uniqueness``), ranges
named by an attribute of the application (``key_ranges``), the SQL range predicates of a
shard (``predicates``) and the databases an AND or an OR of routing conditions names
(``conditions``). Built on ``uid_fields.ids``; knows no ORM and no settings.
"""

from .authority import KeyHash, Placement, allow_off_shard_writes, off_shard_writes_allowed
from .conditions import all_of, any_of
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
from .new_objects import (
    NewId,
    check_id_change,
    check_key_change,
    id_for_new_object,
    ids_for_new_objects,
)
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
from .uniqueness import (
    UniqueSet,
    databases_to_check,
    enforced_by_databases,
    named_unique_set,
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
    "UniqueSet",
    "all_of",
    "allow_off_shard_writes",
    "any_of",
    "check_family_key",
    "check_id_change",
    "check_key_change",
    "colocated_logical_shard",
    "databases_to_check",
    "enforced_by_databases",
    "family_chain",
    "family_root",
    "id_for_new_object",
    "ids_for_new_objects",
    "logical_shard_in",
    "named_unique_set",
    "natural_route",
    "normalize_shard_key",
    "off_shard_writes_allowed",
    "relation_between",
    "route_fits",
    "route_for",
    "scaled_logical_shard",
    "stamped_logical_shard",
]
