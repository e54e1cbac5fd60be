"""Families deeper than one level: Tenant -> Project -> Task -> Comment (issue 25, item 9).

Every row of a tenant's family lives on the tenant's shard, because each child's shard
key is its parent. The relations between members that are not the shard key (the
grandparent ``Task.tenant``, the self-key ``Task.parent``, the sibling
``TaskLabel.label``, the many-to-many ``Task.labels``) are ordinary same-database
relations: real foreign-key constraints, CASCADE, joins and annotations. A key that
would point out of the row's database is refused before it is written.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core import checks
from django.db import connections, models, transaction
from django.db.models import Count
from django.test.utils import isolate_apps

from tests.django.helpers import capture_all
from tests.django.testapp.models import (
    Comment,
    Customer,
    Label,
    Project,
    Task,
    TaskLabel,
    Tenant,
)
from uid_fields.django import ShardedBigIntField, ShardedManager, SnowflakeField
from uid_fields.django.checks import check_managers, relation_errors
from uid_fields.django.ops.moves import map_models
from uid_fields.django.routing import colocated, family_root
from uid_fields.errors import WrongShardError

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

FAMILY = [Tenant, Project, Label, Task, TaskLabel, Comment]


def tenant_on(alias: str, name: str = "t") -> Tenant:
    """A tenant whose id places it on ``alias``."""
    while True:
        tenant = Tenant(name=name)
        if Tenant._meta.pk.placement.database_of(tenant.pk) == alias:
            tenant.save()
            return tenant


def family(alias: str) -> dict[str, Any]:
    tenant = tenant_on(alias)
    project = Project.objects.create(tenant=tenant, name="p")
    task = Task.objects.create(project=project, tenant=tenant, title="root")
    sub = Task.objects.create(project=project, tenant=tenant, parent=task, title="sub")
    label = Label.objects.create(tenant=tenant, name="urgent")
    link = TaskLabel.objects.create(task=task, label=label)
    comment = Comment.objects.create(task=sub, text="hi")
    return dict(
        tenant=tenant, project=project, task=task, sub=sub, label=label, link=link, comment=comment
    )


def test_relations_inside_a_family_pass_the_checks() -> None:
    errors = relation_errors(FAMILY)
    assert [(e.id, str(e.obj)) for e in errors] == []
    assert {m.id for m in check_managers() if isinstance(m, checks.Error)} == set()


def test_the_root_of_a_family_is_found_through_every_level() -> None:
    assert {family_root(m) for m in FAMILY} == {Tenant}
    assert family_root(Customer) is Customer
    for model in FAMILY:
        for other in FAMILY:
            if not model is other is Tenant:
                assert colocated(model, other), (model, other)
    assert not colocated(Tenant, Tenant)  # two roots: two families
    assert not colocated(Task, Customer)


def test_a_family_lives_on_its_tenants_shard_with_real_constraints() -> None:
    alias = settings.SHARDS[2]
    rows = family(alias)
    assert {row._state.db for row in rows.values()} == {alias}
    for name, row in rows.items():
        assert type(row).objects.using(alias).filter(pk=row.pk).exists(), name
    with connections[alias].cursor() as cursor:
        constraints = connections[alias].introspection.get_constraints(cursor, "testapp_task")
        labels = connections[alias].introspection.get_constraints(cursor, "testapp_tasklabel")
        through = connections[alias].introspection.get_constraints(cursor, "testapp_task_labels")
    keys = {c["columns"][0]: c["foreign_key"] for c in constraints.values() if c["foreign_key"]}
    assert keys["tenant_id"][0] == "testapp_tenant"
    assert keys["parent_id"][0] == "testapp_task"
    assert any(c["foreign_key"] and c["columns"] == ["label_id"] for c in labels.values())
    assert {c["foreign_key"][0] for c in through.values() if c["foreign_key"]} == {
        "testapp_task",
        "testapp_label",
    }


def test_related_managers_and_joins_inside_the_family_stay_on_the_shard() -> None:
    alias = settings.SHARDS[1]
    rows = family(alias)
    tenant, task, sub = rows["tenant"], rows["task"], rows["sub"]
    assert {t.title for t in tenant.tasks.all()} == {"root", "sub"}
    assert tenant.tasks.all().db == alias
    assert [t.title for t in task.subtasks.all()] == ["sub"]
    loaded = Task.objects.select_related("tenant", "parent", "project__tenant").get(pk=sub.pk)
    assert loaded.tenant == tenant and loaded.parent == task
    assert loaded.project.tenant == tenant
    assert [link.label.name for link in task.task_labels.select_related("label")] == ["urgent"]


def test_many_to_many_inside_the_family_keeps_its_rows_on_the_shard() -> None:
    alias = settings.SHARDS[3]
    rows = family(alias)
    task, label = rows["task"], rows["label"]
    other = Label.objects.create(tenant=rows["tenant"], name="later")
    task.labels.add(label, other)
    assert sorted(lb.name for lb in task.labels.all()) == ["later", "urgent"]
    assert [t.title for t in label.tasks.all()] == ["root"]
    through = Task.labels.through
    assert through.objects.using(alias).filter(task=task).count() == 2
    task.labels.remove(other)
    assert [lb.name for lb in Task.objects.get(pk=task.pk).labels.all()] == ["urgent"]
    label.tasks.add(rows["sub"])
    assert through.objects.using(alias).count() == 2


def test_annotations_over_two_levels_combine_across_shards() -> None:
    first, second = family(settings.SHARDS[0]), family(settings.SHARDS[2])
    Task.objects.create(project=second["project"], tenant=second["tenant"], title="third")
    counted = Tenant.objects.on_all_shards().annotate(n=Count("projects__tasks")).order_by("pk")
    assert {t.pk: t.n for t in counted} == {first["tenant"].pk: 2, second["tenant"].pk: 3}
    labelled = Task.objects.on_all_shards().annotate(n=Count("labels")).filter(n__gt=0)
    assert list(labelled) == []
    on_one = Tenant.objects.using(settings.SHARDS[2]).annotate(n=Count("tasks"))
    assert [t.n for t in on_one] == [3]


def test_deleting_the_root_cascades_through_every_level_on_its_shard() -> None:
    alias = settings.SHARDS[1]
    rows = family(alias)
    rows["task"].labels.add(rows["label"])
    keep = family(alias)
    rows["tenant"].delete()
    for name, row in rows.items():
        assert not type(row).objects.using(alias).filter(pk=row.pk).exists(), name
    assert not Task.labels.through.objects.using(alias).filter(task_id=rows["task"].pk).exists()
    for name, row in keep.items():
        assert type(row).objects.using(alias).filter(pk=row.pk).exists(), name


def test_a_key_inside_the_family_that_points_at_another_database_is_refused() -> None:
    here, there = family(settings.SHARDS[0]), family(settings.SHARDS[1])
    stray = Task(project=here["project"], tenant=there["tenant"], title="stray")
    with pytest.raises(WrongShardError, match=r"Task\.tenant"):
        stray.save()
    task = here["task"]
    task.parent_id = there["task"].pk
    with pytest.raises(WrongShardError, match=r"Task\.parent"):
        task.save()
    with pytest.raises(WrongShardError, match=r"TaskLabel\.label"):
        TaskLabel.objects.create(task=here["task"], label=there["label"])
    with pytest.raises(WrongShardError):
        Task.objects.bulk_create(
            [Task(project=here["project"], tenant=there["tenant"], title="bulk")]
        )
    # add() writes inside atomic(savepoint=False): a savepoint keeps the test's transaction
    with pytest.raises(ValueError), transaction.atomic(using=settings.SHARDS[0]):
        here["task"].labels.add(there["label"])  # Django asks the router: two databases
    with pytest.raises(WrongShardError), transaction.atomic(using=settings.SHARDS[0]):
        here["task"].labels.add(there["label"].pk)  # by id: checked by uid_fields
    reverse = pytest.raises(WrongShardError, match=r"Label\.tasks names \d+, a row on 'shard_1'")
    with reverse, transaction.atomic(using=settings.SHARDS[0]):
        here["label"].tasks.add(there["task"].pk)
    assert not Task.objects.on_all_shards().filter(title__in=["stray", "bulk"]).exists()


@isolate_apps("tests.django.testapp")
def test_relations_between_families_are_still_refused() -> None:
    class Root(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        partner = models.ForeignKey("self", null=True, on_delete=models.CASCADE)
        friends = models.ManyToManyField("self")

        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    class Leaf(models.Model):
        id = ShardedBigIntField(
            primary_key=True, generator="photos", shards="main", shard_key="root"
        )
        root = models.ForeignKey(Root, on_delete=models.CASCADE)
        customer = models.ForeignKey(Customer, on_delete=models.CASCADE)
        tenants = models.ManyToManyField(Tenant)

        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    errors = relation_errors([Root, Leaf])
    assert sorted((e.id, e.obj.name) for e in errors) == [
        ("uid_fields.E011", "customer"),  # another family's root: another database
        ("uid_fields.E011", "partner"),  # a key between two roots: two families
        ("uid_fields.E015", "friends"),
        ("uid_fields.E015", "tenants"),
    ]


@isolate_apps("tests.django.testapp")
def test_a_many_to_many_through_a_model_of_the_family_is_allowed() -> None:
    class Board(models.Model):
        id = ShardedBigIntField(
            primary_key=True, generator="photos", shards="main", shard_key="tenant"
        )
        tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE)
        pinned = models.ManyToManyField(Label, through="Pin", related_name="+")
        customers = models.ManyToManyField(Customer, through="Pin", related_name="+")

        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    class Pin(models.Model):  # a link row keyed by its board: a member of the family
        id = ShardedBigIntField(
            primary_key=True, generator="photos", shards="main", shard_key="board"
        )
        board = models.ForeignKey(Board, on_delete=models.CASCADE)
        label = models.ForeignKey(Label, on_delete=models.CASCADE)
        customer = models.ForeignKey(Customer, on_delete=models.CASCADE, db_constraint=False)

        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    errors = relation_errors([Board, Pin])
    # The customers live in families of their own: their links cannot stay with both.
    assert [(e.id, e.obj.name) for e in errors] == [("uid_fields.E015", "customers")]


def test_a_shard_move_says_it_does_not_carry_the_automatic_many_to_many_table() -> None:
    """Its ids come from each database's sequence: said, not silently left behind."""
    with pytest.warns(RuntimeWarning, match=r"testapp\.Task_labels .* not carried by a shard"):
        tables = map_models("main")
    labels = {table.store.label for table in tables}
    assert {"testapp.Task", "testapp.TaskLabel", "testapp.Comment"} <= labels
    assert "testapp.Task_labels" not in labels


def test_a_query_by_a_key_inside_the_family_reads_that_rows_shard() -> None:
    alias = settings.SHARDS[3]
    rows = family(alias)
    family(settings.SHARDS[0])
    with capture_all() as log:
        assert {t.title for t in Task.objects.filter(tenant=rows["tenant"])} == {"root", "sub"}
        assert [t.title for t in Task.objects.filter(parent_id=rows["task"].pk)] == ["sub"]
        assert TaskLabel.objects.filter(label=rows["label"]).count() == 1
    assert log.aliases("SELECT") == {alias}
    assert not Task.objects.filter(tenant_id=12345).exists()  # the shard of that id: no row
