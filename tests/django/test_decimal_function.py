"""Decimal ids made by MariaDB, installed by a migration operation on every shard."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connections

from tests.django.testapp.models import LegacyRow
from uid_fields.django.operations import InstallDecimalId
from uid_fields.placement import stamped_logical_shard

pytestmark = [
    pytest.mark.django_db(databases="__all__", transaction=True),
    pytest.mark.skipif(
        settings.BACKEND != "mysql", reason="MariaDB's function: run in the MariaDB pass"
    ),
]


def test_install_decimal_id_makes_ids_that_route_back_to_their_database() -> None:
    operation = InstallDecimalId(generator="legacy", shards="main")
    placement = LegacyRow._meta.pk.placement  # type: ignore[union-attr]
    layout = placement.generator.layout
    try:
        for alias in settings.SHARDS:
            with connections[alias].schema_editor() as editor:
                operation.database_forwards("testapp", editor, None, None)
            with connections[alias].cursor() as cursor:
                cursor.execute("SELECT uid_decimal_id()")
                (value,) = cursor.fetchone()
            parts = layout.decompose(int(value))
            assert parts.server == stamped_logical_shard(placement.shard_map, alias)
            assert placement.database_of(int(value)) == alias  # routes back to its maker
    finally:
        for alias in settings.SHARDS:
            with connections[alias].schema_editor() as editor:
                operation.database_backwards("testapp", editor, None, None)
    with connections["shard_0"].cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.routines WHERE routine_name = %s",
            ["uid_decimal_id"],
        )
        assert cursor.fetchone()[0] == 0
