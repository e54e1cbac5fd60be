"""on_delete across databases (issue 25, item 10).

Deleting a row asks each database that can hold rows pointing at it (by the indexed key
column), runs their on_delete there (CASCADE, SET_NULL, PROTECT, RESTRICT), lists them in
the admin's delete confirmation, and deletes everything in one ``sharded_atomic``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import NotSupportedError, models
from django.db.models import ProtectedError, RestrictedError
from django.db.models.signals import post_delete
from django.test import Client
from django.test.utils import isolate_apps
from django.urls import reverse

from tests.django.helpers import capture_all
from tests.django.testapp.models import (
    Comment,
    Label,
    Project,
    Reminder,
    Task,
    Tenant,
    Watch,
)
from uid_fields.django import ShardedBigIntField, ShardedManager, two_phase_deletes
from uid_fields.django.relations.deletion import referrer_databases

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]
SHARDS = settings.SHARDS


def tenant_on(alias: str) -> Tenant:
    while True:
        tenant = Tenant(name=f"tenant on {alias}")
        if Tenant._meta.pk.placement.database_of(tenant.pk) == alias:
            tenant.save()
            return tenant


def reminder_on(alias: str, task: Task) -> Reminder:
    while True:
        reminder = Reminder(task=task)
        if Reminder._meta.pk.placement.database_of(reminder.pk) == alias:
            reminder.save()
            return reminder


def task_on(alias: str, title: str, **fields: Any) -> Task:
    tenant = tenant_on(alias)
    project = Project.objects.create(tenant=tenant, name=f"project of {title}")
    return Task.objects.create(project=project, tenant=tenant, title=title, **fields)


def exists(row: Any) -> bool:
    return type(row).objects.using(row._state.db).filter(pk=row.pk).exists()  # type: ignore[no-any-return]


@pytest.fixture
def ann() -> User:
    return User.objects.create(username="ann")


@pytest.fixture
def bob() -> User:
    return User.objects.create(username="bob")


def test_deleting_a_user_deletes_the_tasks_they_created_on_every_shard(
    ann: User, bob: User
) -> None:
    tasks = [task_on(alias, f"ann's {alias}", created_by=ann) for alias in SHARDS]
    comments = [Comment.objects.create(task=t, text="mine", author=ann) for t in tasks]
    label = Label.objects.create(tenant=tasks[0].tenant, name="l")
    tasks[0].labels.add(label)
    kept = task_on(SHARDS[0], "bob's", created_by=bob)
    count, per_model = ann.delete()
    assert per_model["testapp.Task"] == 4
    assert per_model["testapp.Comment"] == 4
    assert per_model["auth.User"] == 1
    assert count == sum(per_model.values())
    assert not any(exists(t) for t in tasks)
    assert not any(exists(c) for c in comments)
    assert not Task.labels.through.objects.using(SHARDS[0]).filter(label=label).exists()
    assert exists(kept) and exists(label)
    assert not User.objects.filter(username="ann").exists()


def test_set_null_across_databases_keeps_the_rows(ann: User, bob: User) -> None:
    tasks = [task_on(alias, "assigned", created_by=bob, assignee=ann) for alias in SHARDS[:2]]
    ann.delete()
    for task in tasks:
        reloaded = Task.objects.get(pk=task.pk)
        assert reloaded.assignee_id is None and reloaded.created_by_id == bob.pk


def test_protect_across_databases_refuses_and_deletes_nothing(ann: User) -> None:
    task = task_on(SHARDS[1], "created", created_by=ann)
    owned = task_on(SHARDS[2], "owned").project
    owned.owner = ann
    owned.save()
    with pytest.raises(ProtectedError) as raised:
        ann.delete()
    assert set(raised.value.protected_objects) == {owned}
    assert User.objects.filter(pk=ann.pk).exists()
    assert exists(task) and exists(owned)


def test_restrict_across_databases(ann: User, bob: User) -> None:
    own = task_on(SHARDS[0], "own", created_by=ann)
    Comment.objects.create(task=own, text="on my own task", author=ann)  # goes with the task
    theirs = task_on(SHARDS[3], "theirs", created_by=bob)
    blocking = Comment.objects.create(task=theirs, text="on bob's task", author=ann)
    with pytest.raises(RestrictedError) as raised:
        ann.delete()
    assert set(raised.value.restricted_objects) == {blocking}
    assert exists(own) and User.objects.filter(pk=ann.pk).exists()
    blocking.delete()
    ann.delete()
    assert not exists(own) and exists(theirs)


def test_deleting_a_sharded_row_reaches_default_and_the_other_shards(ann: User) -> None:
    task = task_on(SHARDS[0], "watched")
    watch = Watch.objects.create(user=ann, task=task)
    reminders = [reminder_on(alias, task) for alias in SHARDS]
    other = task_on(SHARDS[0], "other")
    unrelated = Watch.objects.create(user=ann, task=other)
    _, per_model = task.tenant.delete()
    assert per_model["testapp.Watch"] == 1 and per_model["testapp.Reminder"] == 4
    assert not Watch.objects.filter(pk=watch.pk).exists()
    assert not any(exists(r) for r in reminders)
    assert Watch.objects.filter(pk=unrelated.pk).exists() and exists(other)


def test_queryset_deletes_cascade_across_databases(ann: User, bob: User) -> None:
    tasks = [task_on(alias, "doomed", created_by=ann) for alias in SHARDS]
    watches = [Watch.objects.create(user=bob, task=t) for t in tasks]
    count, per_model = Task.objects.on_all_shards().filter(title="doomed").delete()
    assert per_model == {"testapp.Task": 4, "testapp.Watch": 4}
    assert count == 8
    assert not Watch.objects.filter(pk__in=[w.pk for w in watches]).exists()
    more = [task_on(alias, "again", created_by=ann) for alias in SHARDS[:2]]
    User.objects.filter(username="ann").delete()
    assert not any(exists(t) for t in more)


def test_referring_rows_are_found_by_their_key_on_each_database(ann: User) -> None:
    task_on(SHARDS[2], "one", created_by=ann)
    with capture_all() as log:
        ann.delete()
    for alias in SHARDS:  # quoted "..." or `...` (MySQL)
        selects = [sql for sql in log.sql(alias) if re.match(r"SELECT .*.testapp_task.", sql)]
        assert any(re.search(r".created_by_id. IN \(", sql) for sql in selects), alias
    assert not any("testapp_task" in sql for sql in log.sql("default"))


@pytest.fixture
def failing_on_last_shard() -> Iterator[None]:
    def fail(sender: type, instance: Task, using: str, **kwargs: Any) -> None:
        if using == SHARDS[-1]:
            raise RuntimeError(f"the delete failed on {using}")

    post_delete.connect(fail, sender=Task, dispatch_uid="test-failing-delete")
    yield
    post_delete.disconnect(sender=Task, dispatch_uid="test-failing-delete")


def test_a_failure_on_one_database_rolls_back_every_database(
    ann: User, failing_on_last_shard: None
) -> None:
    tasks = [task_on(alias, "kept", created_by=ann) for alias in SHARDS]
    watch = Watch.objects.create(user=ann, task=tasks[0])
    with pytest.raises(RuntimeError, match="failed on"):
        ann.delete()
    assert User.objects.filter(pk=ann.pk).exists()
    assert Watch.objects.filter(pk=watch.pk).exists()
    assert all(exists(t) for t in tasks)


def test_two_phase_deletes_need_postgresql_on_every_database(ann: User) -> None:
    """Committed by two-phase commit in test_deletes_two_phase.py, on a cluster that
    allows prepared transactions."""
    task = task_on(SHARDS[0], "two-phase", created_by=ann)
    reminder_on(SHARDS[1], task)
    if settings.BACKEND == "postgres":
        # default stays SQLite in the test project: a delete reaching it cannot use 2PC
        with pytest.raises(NotSupportedError, match="two-phase"), two_phase_deletes():
            ann.delete()
    else:
        with pytest.raises(NotSupportedError, match="two-phase"), two_phase_deletes():
            task.delete()
        with pytest.raises(NotSupportedError, match="two-phase"):
            Task.objects.on_all_shards().filter(title="two-phase").delete(two_phase=True)
        with pytest.raises(NotSupportedError, match="two-phase"), two_phase_deletes():
            Task.objects.on_all_shards().filter(title="two-phase").delete()
    assert exists(task) and User.objects.filter(pk=ann.pk).exists()
    task.delete()  # one database only: nothing to commit in two phases
    assert not exists(task)


@isolate_apps("tests.django.testapp")
def test_rows_placed_by_the_key_itself_are_asked_on_that_keys_shard_only() -> None:
    class Draft(models.Model):  # placed by its author: a key to a row on default
        id = ShardedBigIntField(
            primary_key=True, generator="photos", shards="main", shard_key="author"
        )
        author = models.ForeignKey(
            User, on_delete=models.CASCADE, db_constraint=False, related_name="+"
        )
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    users = [User(pk=pk, username=str(pk)) for pk in range(1, 41)]
    by_key = referrer_databases(Draft._meta.get_field("author"), users)
    assert set(by_key) == set(SHARDS)  # 40 keys spread over the shards
    for alias, targets in by_key.items():
        assert all(Draft._meta.pk.databases_for_key(u.pk) == (alias,) for u in targets)
    assert sum(len(t) for t in by_key.values()) == 40
    everywhere = referrer_databases(Task._meta.get_field("created_by"), users[:1])
    assert everywhere == dict.fromkeys(SHARDS, users[:1])


@pytest.fixture
def client() -> Client:
    admin = User.objects.create_superuser("admin", "admin@example.com", "pw")
    c = Client()
    c.force_login(admin)
    return c


def test_the_admin_lists_the_rows_on_the_shards_and_deletes_them(client: Client, ann: User) -> None:
    tasks = [task_on(alias, f"task-{i}", created_by=ann) for i, alias in enumerate(SHARDS)]
    Comment.objects.create(task=tasks[1], text="a comment of task-1")
    watch = Watch.objects.create(user=ann, task=tasks[2])
    url = reverse("admin:auth_user_delete", args=[ann.pk])
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Are you sure" in html
    for task in tasks:
        assert task.title in html
    assert "a comment of task-1" in html
    assert re.search(r"Tasks: 4", html), html
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not any(exists(t) for t in tasks)
    assert not User.objects.filter(pk=ann.pk).exists()
    assert not Watch.objects.filter(pk=watch.pk).exists()


def test_the_admin_shows_what_protects_a_row_on_another_database(client: Client, ann: User) -> None:
    project = task_on(SHARDS[3], "x").project
    project.owner = ann
    project.save()
    page = client.get(reverse("admin:auth_user_delete", args=[ann.pk]))
    html = page.content.decode()
    assert "would require deleting the following protected related objects" in html
    assert project.name in html
