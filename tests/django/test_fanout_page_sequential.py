"""``FAN_OUT_CONCURRENCY = 0`` runs every fan-out one shard after another on the calling
thread, a model page too: no pool thread opens a connection to a shard (on PostgreSQL the
page is otherwise sent to every shard at once from a pool thread)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.conf import settings
from django.db.backends.signals import connection_created
from django.test import override_settings

from tests.django.testapp.models import Ranked
from uid_fields.ops import parallel

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__", transaction=True)]


def test_a_page_with_a_concurrency_of_zero_stays_on_the_calling_thread() -> None:
    made = Ranked.objects.bulk_create(
        [Ranked(bucket=i % 11, rank=i % 5, name=f"n{i}") for i in range(40)]
    )
    parallel.shutdown()
    opened: list[str] = []

    def record(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(record)
    try:
        with override_settings(UID_FIELDS={**settings.UID_FIELDS, "FAN_OUT_CONCURRENCY": 0}):
            page = list(Ranked.objects.on_all_shards().order_by("-pk")[:6])
    finally:
        connection_created.disconnect(record)
    assert [r.pk for r in page] == sorted((r.pk for r in made), reverse=True)[:6]
    assert [name for name in opened if name.startswith("uid_fields-fanout")] == []
