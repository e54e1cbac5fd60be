"""allow_migrate: sharded tables on every shard and not on default; historical models work."""

from __future__ import annotations

import copy

import pytest
from django.conf import settings
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.test.utils import override_settings

from uid_fields.django import ShardRouter

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def tables(alias: str) -> set[str]:
    return set(connections[alias].introspection.table_names())


def test_sharded_tables_live_on_every_shard_and_not_on_default() -> None:
    for alias in settings.SHARDS:
        assert {"testapp_order", "testapp_photo", "testapp_pageview"} <= tables(alias)
        assert "testapp_tag" not in tables(alias)
    assert "testapp_order" not in tables("default")
    assert "testapp_tag" in tables("default")


def test_historical_models_and_run_python() -> None:
    router = ShardRouter()
    loader = MigrationLoader(connections["default"])
    state = loader.project_state(("testapp", "0001_initial"))
    historical = state.apps.get_model("testapp", "Order")
    assert router.allow_migrate("shard_2", "testapp", "order", model=historical) is True
    assert router.allow_migrate("default", "testapp", "order", model=historical) is False
    unsharded = state.apps.get_model("testapp", "Tag")
    assert router.allow_migrate("shard_2", "testapp", "tag", model=unsharded) is False
    assert router.allow_migrate("default", "testapp", "tag", model=unsharded) is None
    assert router.allow_migrate("shard_2", "testapp") is None  # RunPython without hints


def test_sharded_on_default_is_configurable() -> None:
    config = copy.deepcopy(settings.UID_FIELDS)
    config["MIGRATE_SHARDED_ON_DEFAULT"] = True
    with override_settings(UID_FIELDS=config):
        assert ShardRouter().allow_migrate("default", "testapp", "order") is True
