"""A delete that reaches two PostgreSQL shards, committed by two-phase commit.

The shared server does not allow prepared transactions: the shard map points at the two
databases of a throwaway cluster (``tpc_0``, ``tpc_1``, as in test_two_phase.py) for the
test, and the family's tables are made there. Runs once, in the SQLite pass.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test.utils import CaptureQueriesContext, override_settings

from tests.django.test_two_phase import (  # noqa: F401  (fixtures)
    ALIASES,
    cluster,
    cluster_urls,
    prepared,
    tpc,
)
from tests.django.testapp.models import (
    Comment,
    Label,
    Project,
    Reminder,
    Task,
    TaskLabel,
    Tenant,
)
from uid_fields.django import two_phase_deletes

pytestmark = pytest.mark.skipif(
    settings.BACKEND != "sqlite", reason="runs once, on a cluster of its own"
)
TABLES = [Tenant, Project, Label, Task, TaskLabel, Comment, Reminder]


@pytest.fixture
def shards_on_the_cluster(tpc: None) -> Iterator[None]:  # noqa: F811  (the imported fixture)
    """The shard map "main" on tpc_0 and tpc_1, with the family's tables there."""
    config: dict[str, Any] = copy.deepcopy(settings.UID_FIELDS)
    config["SHARDS"] = {"main": {"databases": list(ALIASES)}}
    with override_settings(UID_FIELDS=config):
        for alias in ALIASES:
            with connections[alias].schema_editor() as editor:
                for model in TABLES:
                    editor.create_model(model)
        try:
            yield
        finally:
            for alias in ALIASES:
                with connections[alias].schema_editor() as editor:
                    for model in reversed(TABLES):
                        editor.delete_model(model)


def on(alias: str, make: Any) -> Any:
    while True:
        row = make()
        if type(row)._meta.pk.placement.database_of(row.pk) == alias:
            row.save()
            return row


# default is asked for the rows pointing at the task from there (Watch), outside any
# transaction of the test: two-phase commit must open the outermost one on each shard.
@pytest.mark.django_db(databases=["default"], transaction=True)
def test_a_delete_across_two_shards_commits_by_two_phase_commit(
    shards_on_the_cluster: None,
) -> None:
    tenant = on("tpc_0", lambda: Tenant(name="t"))
    project = Project.objects.create(tenant=tenant, name="p")
    task = Task.objects.create(project=project, tenant=tenant, title="t")
    Comment.objects.create(task=task, text="c")
    reminder = on("tpc_1", lambda: Reminder(task=task))
    kept = on("tpc_1", lambda: Reminder(task=Task.objects.create(project=project, tenant=tenant)))
    with ExitStack() as stack:
        logs = {a: stack.enter_context(CaptureQueriesContext(connections[a])) for a in ALIASES}
        with two_phase_deletes():
            _, per_model = task.delete()
    assert per_model == {"testapp.Task": 1, "testapp.Comment": 1, "testapp.Reminder": 1}
    for alias, log in logs.items():
        assert any("PREPARE TRANSACTION" in q["sql"] for q in log.captured_queries), alias
    assert not Task.objects.using("tpc_0").filter(title="t").exists()
    assert not Reminder.objects.using("tpc_1").filter(pk=reminder.pk).exists()
    assert Reminder.objects.using("tpc_1").filter(pk=kept.pk).exists()
    assert prepared() == []
