"""``manage.py seed_tenants``: tenants, their projects, tasks and comments, one family each."""

from __future__ import annotations

import random
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser

from tenants.models import Comment, Project, Task, Tenant


class Command(BaseCommand):
    help = "Fill the tenants app: every tenant's projects, tasks and comments on its shard."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenants", type=int, default=8)
        parser.add_argument("--projects", type=int, default=2, help="per tenant")
        parser.add_argument("--tasks", type=int, default=5, help="per project")
        parser.add_argument("--seed", type=int, default=11)

    def handle(self, *args: Any, **options: Any) -> None:
        rng = random.Random(options["seed"])
        users = [User.objects.get_or_create(username=name)[0] for name in ("alice", "bob", "carol")]
        tenants = Tenant.objects.bulk_create(
            [Tenant(name=f"Tenant {i}", slug=f"tenant-{i}") for i in range(options["tenants"])]
        )
        projects = Project.objects.bulk_create(
            [
                Project(tenant=tenant, name=f"{tenant.name} project {j}")
                for tenant in tenants
                for j in range(options["projects"])
            ]
        )
        tasks = Task.objects.bulk_create(
            [
                Task(
                    project=project,
                    tenant_id=project.tenant_id,
                    title=f"task {k} of {project.name}",
                    done=rng.random() < 0.3,
                    created_by=rng.choice(users),
                )
                for project in projects
                for k in range(options["tasks"])
            ]
        )
        comments = Comment.objects.bulk_create(
            [
                Comment(task=task, author=rng.choice(users), body=f"comment on {task.title}")
                for task in tasks
                if rng.random() < 0.5
            ]
        )
        self.stdout.write(
            f"seeded {len(tenants)} tenants, {len(projects)} projects, {len(tasks)} tasks, "
            f"{len(comments)} comments"
        )
