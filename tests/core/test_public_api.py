"""The public surface: one name per idea, the names of the design's contract, public
module names that are real modules, and the import paths deprecated in 0.2.0 gone."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import uid_fields
from uid_fields.errors import ShardRoutingError

pytestmark = pytest.mark.sdist

CONTRACT = [
    "SnowflakeLayout",
    "DecimalLayout",
    "TWITTER",
    "INSTAGRAM",
    "SONYFLAKE",
    "SnowflakeGenerator",
    "ShardedIdGenerator",
    "LocalityUUIDGenerator",
    "UniqIdGenerator",
    "locality",
    "uniqid",
    "UidConfig",
    "ShardMap",
    "KeyRanges",
    "ByField",
    "ByModulo",
    "ByDecimalServer",
    "ByLocalityBlock",
    "ByUniqIdDigit",
    "ShardRoutingError",
    "UnmergeableQueryError",
    "CrossDatabaseRelationError",
    "WrongShardError",
    "allow_off_shard_writes",
    "PublicIds",
    "PublicIdError",
]


@pytest.mark.parametrize("name", CONTRACT)
def test_the_contract_names_import_from_the_package(name: str) -> None:
    assert getattr(uid_fields, name) is not None
    assert name in uid_fields.__all__


def test_unroutable_query_error_is_no_export_but_still_imports_with_a_warning() -> None:
    assert "UnroutableQueryError" not in uid_fields.__all__
    with pytest.warns(DeprecationWarning, match="ShardRoutingError"):
        from uid_fields import UnroutableQueryError
    assert UnroutableQueryError is ShardRoutingError
    with pytest.warns(DeprecationWarning, match="ShardRoutingError"):
        from uid_fields.errors import UnroutableQueryError as again
    assert again is ShardRoutingError
    with pytest.raises(AttributeError):
        uid_fields.NoSuchName  # noqa: B018


#: The paths deprecated in 0.2.0 (each warned, naming its new place) and removed in 0.3.0.
REMOVED = {
    "uid_fields.validate": "uid_fields._internal.validate",
    "uid_fields.timeutil": "uid_fields._internal.timeutil",
    "uid_fields.forks": "uid_fields._internal.forks",
    "uid_fields._redis": "uid_fields._internal.redis",
    "uid_fields.hashing": "uid_fields._internal.hashing",
    "uid_fields.layouts": "uid_fields.ids.layouts",
    "uid_fields.generators": "uid_fields.ids.generators",
    "uid_fields.sequences": "uid_fields.ids.sequences",
    "uid_fields.workers": "uid_fields.ids.nodes",
    "uid_fields.leases": "uid_fields.ids.leases",
    "uid_fields.leases.database": "uid_fields.ids.leases.database",
    "uid_fields.leases.redis": "uid_fields.ids.leases.redis",
    "uid_fields.leases.state": "uid_fields.ids.leases.state",
    "uid_fields.shards": "uid_fields.placement.shards",
    "uid_fields.predicates": "uid_fields.placement.predicates",
    "uid_fields.moves": "uid_fields.ops.moves",
    "uid_fields.twophase": "uid_fields.ops.twophase",
    "uid_fields.replicas": "uid_fields.ops.replicas",
    "uid_fields.parallel": "uid_fields.ops.parallel",
    "uid_fields.audit": "uid_fields.ops.audit",
    "uid_fields.sqlalchemy.errors": "uid_fields.errors",
}


@pytest.mark.parametrize("old", sorted(REMOVED))
def test_a_removed_path_no_longer_imports_and_its_new_place_does(old: str) -> None:
    if old.startswith("uid_fields.sqlalchemy"):
        pytest.importorskip("sqlalchemy")
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert importlib.import_module(REMOVED[old]) is not None


@pytest.mark.parametrize("name", ["locality", "uniqid"])
def test_the_public_module_names_are_real_modules(name: str) -> None:
    """``import uid_fields.locality`` finds a file (a type checker sees it) that has the
    names of ``uid_fields.ids.locality``, and imports without a warning."""
    sys.modules.pop(f"uid_fields.{name}", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(f"uid_fields.{name}")
    inner = importlib.import_module(f"uid_fields.ids.{name}")
    assert module.__file__ is not None and module.__file__.endswith(f"uid_fields/{name}.py")
    assert module.__all__ == inner.__all__
    assert all(getattr(module, n) is getattr(inner, n) for n in inner.__all__)
    assert not any(type(f).__name__ == "MovedModules" for f in sys.meta_path)


def test_documented_names_resolve_at_their_places() -> None:
    from uid_fields.config import UidConfig, validate
    from uid_fields.placement import colocated_logical_shard, route_for
    from uid_fields.placement.shards import ShardMap

    assert UidConfig is uid_fields.UidConfig
    assert callable(validate) and callable(route_for) and callable(colocated_logical_shard)
    assert ShardMap is uid_fields.ShardMap


def test_sqlalchemy_has_the_same_fields_as_django() -> None:
    pytest.importorskip("sqlalchemy")
    sqlalchemy_fields = importlib.import_module("uid_fields.sqlalchemy")
    for name in ("SnowflakeField", "ShardedBigIntField", "LocalityUUIDField", "UniqIdField"):
        assert name in sqlalchemy_fields.__all__


def test_one_name_for_the_read_your_writes_setting() -> None:
    pytest.importorskip("sqlalchemy")
    from sqlalchemy import create_engine

    from uid_fields.sqlalchemy import sharded_session

    engines = {"shard_0": create_engine("sqlite://")}
    session = sharded_session(engines, read_your_writes_seconds=3)
    assert session.read_pins.seconds == 3
    with pytest.warns(DeprecationWarning, match="read_your_writes_seconds"):
        old = sharded_session(engines, read_your_writes_s=4)
    assert old.read_pins.seconds == 4
