"""The public surface: one name per idea, the names of the design's contract, and the
import paths that moved kept working for one minor version with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import uid_fields
from uid_fields._internal.moved import ALIASES, MOVED
from uid_fields.errors import ShardRoutingError

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


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_imports_by_its_old_path_with_a_warning(old: str) -> None:
    if old.startswith("uid_fields.sqlalchemy"):
        pytest.importorskip("sqlalchemy")
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__spec__ is not None and module.__spec__.name == MOVED[old]


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_the_public_module_names_import_without_a_warning(old: str) -> None:
    sys.modules.pop(old, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module(old)
    assert module is importlib.import_module(ALIASES[old])


def test_documented_names_of_moved_modules_still_resolve() -> None:
    from uid_fields.config import UidConfig, validate
    from uid_fields.placement import colocated_logical_shard, route_for

    assert UidConfig is uid_fields.UidConfig
    assert callable(validate) and callable(route_for) and callable(colocated_logical_shard)
    sys.modules.pop("uid_fields.shards", None)
    with pytest.warns(DeprecationWarning):
        from uid_fields.shards import ShardMap
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
