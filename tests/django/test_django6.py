"""What Django 6.x changed under the adapter, checked on every supported Django.

Django 6.1 passes every database to ``manage.py check``, so field checks ask the router
whether each model migrates there: the router must answer from a malformed ``UID_FIELDS``
without raising, so that the checks (E004/E014, with the map's name) report it.
"""

from __future__ import annotations

import copy

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.db import router
from django.test.utils import override_settings

from tests.django.testapp.models import Order

# The checks given databases read them (W003 compares their migrations).
pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def _malformed_map() -> override_settings:
    config = copy.deepcopy(settings.UID_FIELDS)
    config["SHARDS"]["main"]["replicas"] = {"shard_1": "shard_1_r1"}  # a str, not a list
    return override_settings(UID_FIELDS=config)


@pytest.mark.parametrize("database", ["default", "shard_0", "shard_1"])
def test_the_router_never_raises_while_the_checks_run(database: str) -> None:
    with _malformed_map():
        assert router.allow_migrate_model(database, Order) in (True, False)


def test_checks_over_every_database_report_the_malformed_map() -> None:
    with _malformed_map():
        messages = run_checks(databases=list(settings.DATABASES))
    bad = [m for m in messages if m.id == "uid_fields.E014"]
    assert bad and "SHARDS.main.replicas" in bad[0].msg
