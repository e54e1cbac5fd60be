"""A multi-tenant app: Tenant -> Project -> Task -> Comment, one family per tenant.

Every row of a tenant's family lives on the tenant's shard: projects by their shard key
(the tenant), tasks by theirs (the project), comments with their task (a follower: its
own id names no shard). Keys inside the family (``Task.tenant``, the grandparent) are
ordinary keys of one database; keys to ``auth.User`` on ``default`` are soft keys whose
``on_delete`` runs on every shard that holds referring rows.
"""

from django.db import models

from uid_fields.django import ShardedBigIntField, ShardedManager, SnowflakeField


class Tenant(models.Model):
    """The root: placed by its own id. The slug is validated unique on every shard."""

    id = SnowflakeField(primary_key=True, shards="shop")
    name = models.CharField(max_length=100)
    slug = models.SlugField(unique=True)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    """Lives on its tenant's shard."""

    id = ShardedBigIntField(primary_key=True, generator="orders", shards="shop", shard_key="tenant")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=100)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    """Lives with its project, so on its tenant's shard too (two levels down)."""

    id = ShardedBigIntField(
        primary_key=True, generator="orders", shards="shop", shard_key="project"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    # The grandparent, inside the family: a real key on the same database. Filled from
    # the project when left empty, so forms need not ask for it.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="tasks", blank=True, editable=False
    )
    title = models.CharField(max_length=200)
    done = models.BooleanField(default=False)
    # A key to default: no constraint can hold across databases, SET_NULL runs on shards.
    created_by = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        related_name="created_tasks",
    )

    objects = ShardedManager()

    def save(self, *args: object, **kwargs: object) -> None:
        if self.tenant_id is None and self.project_id is not None:
            self.tenant_id = self.project.tenant_id
        super().save(*args, **kwargs)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.title


class Comment(models.Model):
    """A follower of its task: its own Snowflake id names no shard, it lives with the task."""

    id = SnowflakeField(primary_key=True)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    # Deleting a user deletes their comments on every shard.
    author = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="task_comments",
    )
    body = models.CharField(max_length=500)

    objects = ShardedManager()

    def __str__(self) -> str:
        return self.body[:40]
