"""Models of the test project, one per way the fields are used."""

from __future__ import annotations

from django.contrib.contenttypes.models import ContentType
from django.db import models

from uid_fields.django import (
    LocalityUUIDField,
    ShardedBigIntField,
    ShardedManager,
    SnowflakeField,
    UniqIdField,
)
from uid_fields.django.generic import GenericForeignKey


class Order(models.Model):
    id = SnowflakeField(primary_key=True, shards="main", public_prefix="ord")
    note = models.CharField(max_length=100, blank=True)

    objects = ShardedManager()

    class Meta:
        ordering = ["id"]


class Customer(models.Model):
    id = SnowflakeField(primary_key=True, shards="main", public_prefix="cus")
    name = models.CharField(max_length=100)

    objects = ShardedManager()


class Purchase(models.Model):
    """Co-located with its customer: the shard key is a foreign key to a sharded model."""

    id = ShardedBigIntField(
        primary_key=True,
        generator="photos",
        shards="main",
        shard_key="customer",
        public_prefix="pur",
    )
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="purchases")
    total = models.IntegerField(default=0)

    objects = ShardedManager()


class PurchaseLine(models.Model):
    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="purchase"
    )
    purchase = models.ForeignKey(Purchase, on_delete=models.CASCADE, related_name="lines")
    sku = models.CharField(max_length=20)

    objects = ShardedManager()


class Photo(models.Model):
    """Instagram's case: an owner's photos share a logical shard (owner_id % 8192)."""

    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="owner_id"
    )
    owner_id = models.BigIntegerField()
    caption = models.CharField(max_length=100, blank=True)

    objects = ShardedManager()


class PageView(models.Model):
    id = LocalityUUIDField(primary_key=True, generator="events", shards="main", public_prefix="pv")
    path = models.CharField(max_length=200)

    objects = ShardedManager()


class LegacyRow(models.Model):
    id = SnowflakeField(primary_key=True, generator="legacy", shards="main")
    label = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class PhpRow(models.Model):
    id = UniqIdField(primary_key=True, generator="php", shards="main")
    label = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class Tag(models.Model):
    """Not sharded: lives on default, with a snowflake in a non-key column."""

    ref = SnowflakeField(unique=True)
    name = models.CharField(max_length=50)


class Review(models.Model):
    """Not co-located with its order: a soft reference (no constraint across databases)."""

    id = SnowflakeField(primary_key=True, shards="main")
    order = models.ForeignKey(
        Order, on_delete=models.DO_NOTHING, db_constraint=False, related_name="reviews"
    )
    stars = models.IntegerField(default=5)

    objects = ShardedManager()


class OrderLine(models.Model):
    """A child with a uid id of its own that names no shard: it lives with its order."""

    id = SnowflakeField(primary_key=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="lines")
    sku = models.CharField(max_length=20, blank=True)

    objects = ShardedManager()


class Device(models.Model):
    """Rows placed by a UUID shard key."""

    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="device_uuid"
    )
    device_uuid = models.UUIDField()

    objects = ShardedManager()


class Snap(models.Model):
    """Sharded ids with no shard key: the core picks a database per row."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main")
    label = models.CharField(max_length=20, blank=True)

    objects = ShardedManager()


class Coupon(models.Model):
    """An ordinary model on ``default``, pointed at by sharded rows."""

    code = models.CharField(max_length=20)


class Basket(models.Model):
    """A sharded row with references to ordinary models (no constraint across databases)."""

    id = SnowflakeField(primary_key=True, shards="main")
    coupon = models.ForeignKey(Coupon, null=True, on_delete=models.DO_NOTHING, db_constraint=False)
    created_by = models.ForeignKey(
        "auth.User", null=True, on_delete=models.DO_NOTHING, db_constraint=False
    )
    ref = SnowflakeField(null=True)  # a nullable uid column: None stays NULL

    objects = ShardedManager()


class Note(models.Model):
    """An ordinary model on ``default`` that points at a sharded customer."""

    customer = models.ForeignKey(
        Customer, on_delete=models.DO_NOTHING, db_constraint=False, related_name="notes"
    )
    text = models.CharField(max_length=50)


class Stamp(models.Model):
    """Timestamps Django sets itself on save: a copy of the row must keep the original's."""

    id = SnowflakeField(primary_key=True, shards="main")
    created = models.DateTimeField(auto_now_add=True)
    changed = models.DateTimeField(auto_now=True)

    objects = ShardedManager()


class Ranked(models.Model):
    """Rows placed by ``bucket``, with a nullable rank and mixed-case, accented names: what
    a fan-out merge must order as one database does."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main", shard_key="bucket")
    bucket = models.BigIntegerField()
    rank = models.IntegerField(null=True)
    name = models.CharField(max_length=20)

    objects = ShardedManager()


class Board(models.Model):
    """A tenant-like sharded row (its own ids), with a nullable key to ``auth.User`` on
    ``default``."""

    id = SnowflakeField(primary_key=True, shards="main")
    name = models.CharField(max_length=50)
    owner = models.ForeignKey(
        "auth.User", null=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name


class Card(models.Model):
    """A task-like row with ids of its own: a soft key to a board that may be on another
    shard, a key to ``auth.User`` and a nullable key to a model on ``default``."""

    id = SnowflakeField(primary_key=True, shards="main")
    board = models.ForeignKey(
        Board, on_delete=models.DO_NOTHING, db_constraint=False, related_name="cards"
    )
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    coupon = models.ForeignKey(
        Coupon, null=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    title = models.CharField(max_length=50)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.title


class CardStep(models.Model):
    """Co-located with its card (the shard key is the foreign key)."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main", shard_key="card")
    card = models.ForeignKey(Card, on_delete=models.CASCADE, related_name="steps")
    label = models.CharField(max_length=20, blank=True)

    objects = ShardedManager()


class Workspace(models.Model):
    """The issue's tenant: unique values on rows spread over every shard. The databases
    hold each slug once per shard only; validation checks every shard."""

    id = SnowflakeField(primary_key=True, shards="main")
    slug = models.SlugField(unique=True)
    domain = models.CharField(max_length=50, null=True, blank=True, unique=True)

    objects = ShardedManager()


class CardCover(models.Model):
    """A one-to-one soft key from rows of their own ids: the cover may live on another shard
    than its card (``card.cover`` is a reverse one-to-one across databases)."""

    id = SnowflakeField(primary_key=True, shards="main")
    card = models.OneToOneField(
        Card, on_delete=models.DO_NOTHING, db_constraint=False, related_name="cover"
    )
    color = models.CharField(max_length=20, blank=True)

    objects = ShardedManager()


class Memo(models.Model):
    """An ordinary model on ``default`` with a key to sharded boards, given the sharded
    manager so that ``select_related("board")`` reads the boards from their shards."""

    board = models.ForeignKey(
        Board, on_delete=models.DO_NOTHING, db_constraint=False, related_name="memos"
    )
    text = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class Remark(models.Model):
    """A follower: an id of its own that names no shard, and a foreign key (with its
    constraint) to a sharded parent, whose database it lives on."""

    id = SnowflakeField(primary_key=True)
    purchase = models.ForeignKey(Purchase, on_delete=models.CASCADE, related_name="remarks")
    text = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.text


class Bookmark(models.Model):
    """An ordinary model on ``default`` whose generic key points at rows of any model,
    sharded ones included."""

    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
    object_id = models.CharField(max_length=40)  # integer and UUID ids alike
    target = GenericForeignKey("content_type", "object_id")
    label = models.CharField(max_length=50, blank=True)


class Ticket(models.Model):
    """Rows co-located with their workspace, with unique sets the databases enforce (they
    include the shard key) and sets that can span shards."""

    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="workspace"
    )
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tickets")
    number = models.IntegerField()
    reporter = models.CharField(max_length=50, null=True, blank=True)
    reference = models.CharField(max_length=20, null=True, blank=True)
    title = models.CharField(max_length=50, null=True, blank=True)
    open = models.BooleanField(default=True)
    due = models.DateField(null=True, blank=True)
    slot = models.CharField(max_length=20, null=True, blank=True, unique_for_date="due")

    objects = ShardedManager()

    class Meta:
        unique_together = [("workspace", "number"), ("reporter", "number")]
        constraints = [
            models.UniqueConstraint(fields=["reference"], name="ticket_reference_unique"),
            models.UniqueConstraint(
                fields=["title"], condition=models.Q(open=True), name="ticket_open_title_unique"
            ),
            models.UniqueConstraint(fields=["workspace", "title"], name="ticket_title_per_ws"),
        ]


class Attachment(models.Model):
    """A follower (a uid id naming no shard, a constrained key to a sharded parent) with a
    unique set the databases enforce (it includes the parent key) and one they cannot."""

    id = SnowflakeField(primary_key=True)
    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="attachments")
    name = models.CharField(max_length=50)
    checksum = models.CharField(max_length=64, unique=True)

    objects = ShardedManager()

    class Meta:
        unique_together = [("ticket", "name")]


class WorkspaceSlug(models.Model):
    """The docs' key table on ``default``: one row per slug, so its unique index holds
    the slug once across every shard (written with the workspace in one sharded_atomic)."""

    slug = models.SlugField(unique=True)
    workspace_id = models.BigIntegerField()


# -- A family three levels deep, with keys to auth.User ------------------------------------
# Tenant -> Project -> Task -> Comment: every row lives on its tenant's shard, because each
# child's shard key is its parent. Relations between members of the family that are not
# the shard key (Task.tenant, Task.parent, Task.labels, TaskLabel.label) are ordinary
# same-database relations with real constraints; keys to auth.User (on default) and soft
# keys from rows placed elsewhere (Reminder, Watch) are deleted across databases.


class Tenant(models.Model):
    """The root of the family: placed by its own id."""

    id = SnowflakeField(primary_key=True, shards="main")
    name = models.CharField(max_length=50)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main", shard_key="tenant")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=50)
    owner = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        db_constraint=False,
        related_name="owned_projects",
    )

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name


class Label(models.Model):
    """A sibling of the projects: keyed by the tenant too."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main", shard_key="tenant")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=50)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    id = ShardedBigIntField(
        primary_key=True, generator="photos", shards="main", shard_key="project"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tasks")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="subtasks"
    )
    labels = models.ManyToManyField(Label, blank=True, related_name="tasks")
    created_by = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="created_tasks",
    )
    assignee = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        related_name="assigned_tasks",
    )
    title = models.CharField(max_length=50)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.title


class TaskLabel(models.Model):
    """A link row of its own, keyed by its task, whose label is a sibling in the family."""

    id = ShardedBigIntField(primary_key=True, generator="photos", shards="main", shard_key="task")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="task_labels")
    label = models.ForeignKey(Label, on_delete=models.CASCADE, related_name="task_labels")

    objects = ShardedManager()


class Comment(models.Model):
    """A follower: its own id names no shard, so it lives with its task."""

    id = SnowflakeField(primary_key=True)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.RESTRICT,
        db_constraint=False,
        related_name="task_comments",
    )
    text = models.CharField(max_length=100)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.text


class Reminder(models.Model):
    """Placed by its own id, so on any shard: a soft key to a task that cascades."""

    id = SnowflakeField(primary_key=True, shards="main")
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, db_constraint=False, related_name="reminders"
    )
    note = models.CharField(max_length=50, blank=True)

    objects = ShardedManager()


class Watch(models.Model):
    """An ordinary model on ``default``: a user watching a task that lives on a shard."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="watches")
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, db_constraint=False, related_name="watches"
    )
