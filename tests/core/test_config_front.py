"""``UidConfig`` refuses at first use what the system checks refuse: both ORMs build
through it, and a worker process runs no checks."""

from __future__ import annotations

from typing import Any

import pytest

from uid_fields import ConfigurationError, ShardedIdGenerator
from uid_fields.config import UidConfig, UnknownEntryError

#: Instagram ids made in Python with a per-process sequence: check E016.
SHARDED: dict[str, Any] = {
    "kind": "sharded",
    "layout": "instagram",
    "epoch": "2024-01-01T00:00:00Z",
}

SETTINGS: dict[str, Any] = {
    "GENERATORS": {
        "orders": {"kind": "snowflake", "epoch": "2024-01-01T00:00:00Z"},
        "photos": {**SHARDED, "single_process": True},
    },
    "SHARDS": {"main": {"databases": ["a", "b"]}},
}


def test_uid_config_refuses_what_the_checks_refuse_naming_the_key_and_the_check() -> None:
    config = UidConfig({"GENERATORS": {"photos": SHARDED}})
    for _ in range(2):  # refused at every use, never built
        with pytest.raises(ConfigurationError, match=r"^GENERATORS\.photos: .*E016") as caught:
            config.generator("photos")
        assert "single_process" in str(caught.value)
    assert config.built_generator("photos") is None
    assert isinstance(UidConfig(SETTINGS).generator("photos"), ShardedIdGenerator)


def test_uid_config_builds_a_generator_whose_ids_only_a_database_makes() -> None:
    """E016 does not apply to a generator that only decodes and routes ids a database
    makes (database_default), as the checks skip it."""
    config = UidConfig({"GENERATORS": {"photos": SHARDED}}, database_made={"photos"})
    photos = config.generator("photos")
    assert isinstance(photos, ShardedIdGenerator)
    assert config.built_generator("photos") is photos


def test_an_unknown_name_is_a_configuration_error_and_a_lookup_error() -> None:
    config = UidConfig(SETTINGS)
    with pytest.raises(UnknownEntryError, match=r"^GENERATORS\.nope: .*no generator 'nope'") as e:
        config.generator("nope")
    assert isinstance(e.value, ConfigurationError) and isinstance(e.value, LookupError)
    with pytest.raises(LookupError, match=r"^SHARDS\.nope: .*no shard map 'nope'"):
        config.shard_map("nope", "orders")
