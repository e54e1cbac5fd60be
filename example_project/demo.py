"""``make demo``: set up the shop's shards, seed them, and show where every row went.

Runs on SQLite files by default (nothing to install); ``EXAMPLE_DB=postgres`` or
``EXAMPLE_DB=mysql`` puts the four shards on a local server.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")

import django  # noqa: E402

DEMO_USER, DEMO_PASSWORD = "demo", "demo-password"


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def tenant_family(
    Tenant: Any, Project: Any, Task: Any, Comment: Any, User: Any, shards: list[str]
) -> None:
    """A tenant's rows, three levels down, all on its shard; a unique slug; a user deleted."""
    from django.core.exceptions import ValidationError
    from django.core.management import call_command
    from django.db import router

    call_command("seed_tenants", tenants=8, projects=2, tasks=5)
    print(f"{'model':<10} " + " ".join(f"{alias:>9}" for alias in shards))
    for model in (Tenant, Project, Task, Comment):
        counts = [model.objects.using(alias).count() for alias in shards]
        print(f"{model.__name__:<10} " + " ".join(f"{n:>9}" for n in counts))
    tenant = Tenant.objects.on_all_shards().order_by("id").first()
    home = tenant._state.db
    dbs = {
        model.__name__: sorted({row._state.db for row in rows})
        for model, rows in (
            (Project, tenant.projects.all()),
            (Task, Task.objects.filter(tenant=tenant)),
            (Comment, Comment.objects.filter(task__in=list(tenant.tasks.all()))),
        )
    }
    print(f"{tenant} lives on {home}; its rows: {dbs}")
    task = Task.objects.filter(tenant=tenant).select_related("created_by").first()
    print(f"task {task.pk} on {task._state.db}, created_by {task.created_by} (read from default)")

    twin = Tenant(name="Copycat", slug=tenant.slug)
    while router.db_for_write(Tenant, instance=twin) == home:  # an id of another shard
        twin = Tenant(name="Copycat", slug=tenant.slug)
    try:
        twin.full_clean()
        print("slug accepted (unexpected)")
    except ValidationError as error:
        where = router.db_for_write(Tenant, instance=twin)
        print(f"slug {tenant.slug!r} for a new tenant on {where} refused: {error.messages[0]}")

    user = User.objects.get(username="alice")
    comments = Comment.objects.on_all_shards().filter(author_id=user.pk).count()
    tasks = Task.objects.on_all_shards().filter(created_by_id=user.pk).count()
    comment_shards = [
        alias for alias in shards if Comment.objects.using(alias).filter(author_id=user.pk).exists()
    ]
    user.delete()
    left = Comment.objects.on_all_shards().filter(author_id=user.pk).count()
    nulled = Task.objects.on_all_shards().filter(created_by__isnull=True).count()
    print(
        f"deleted user alice (on default): her {comments} comments on {comment_shards} deleted "
        f"(CASCADE, {left} left), her {tasks} tasks kept with created_by cleared "
        f"(SET_NULL, {nulled} tasks without a creator)"
    )


def main() -> None:
    from shop import databases

    databases.create_missing()
    django.setup()

    from analytics.models import PageView
    from customers.models import Customer
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from orders.models import Order, OrderLine
    from tenants.models import Comment, Project, Task, Tenant

    section(f"1. migrate default + {len(databases.SHARDS)} shards ({databases.BACKEND})")
    call_command("uid_fields", "migrate-all", verbosity=0)
    for alias in databases.SHARDS:  # start from empty shards, so every run shows the same
        for model in (OrderLine, Order, Customer, PageView, Comment, Task, Project, Tenant):
            model.objects.using(alias).all().delete()
    User.objects.filter(username__in=["alice", "bob", "carol"]).delete()  # seed_tenants' users

    section("2. seed")
    started_at = timezone.now()
    call_command("seed_demo", customers=200, orders=1000, views=2000)

    section("3. rows per shard (every row went where its id says)")
    print(f"{'model':<10} " + " ".join(f"{alias:>9}" for alias in databases.SHARDS))
    for model in (Customer, Order, OrderLine, PageView):
        counts = [model.objects.using(alias).count() for alias in databases.SHARDS]
        print(f"{model.__name__:<10} " + " ".join(f"{n:>9}" for n in counts))
    shop_tables = [
        t
        for t in connections["default"].introspection.table_names()
        if t.startswith(("customers_", "orders_", "analytics_"))
    ]
    print(f"default holds users and sessions; shop tables there: {shop_tables or 'none'}")

    section("4. a few ids, decoded")
    newest = list(Order.objects.on_all_shards().order_by("-id")[:3])
    for order in newest:
        parts = order.id_parts
        print(
            f"order {order.pk}: created {parts.datetime:%Y-%m-%d %H:%M:%S.%f} UTC, "
            f"logical shard {parts.shard}, sequence {parts.sequence}, on {order._state.db} "
            f"with its customer ({order.customer._state.db})"
        )
    customer = Customer.objects.on_all_shards().first()
    assert customer is not None
    cparts = customer.id_parts
    print(
        f"customer {customer.pk}: created {cparts.datetime:%H:%M:%S.%f}, worker {cparts.worker}, "
        f"datacenter {cparts.datacenter}, sequence {cparts.sequence}"
    )
    view = PageView.objects.on_all_shards().first()
    assert view is not None
    vparts = view.id_parts
    print(f"page view {view.pk}: pid {vparts.pid}, mac {vparts.mac:07x}, counter {vparts.counter}")

    section("5. a routed get(): one query, one database")
    target = newest[0]
    logs = {alias: CaptureQueriesContext(connections[alias]) for alias in settings.DATABASES}
    for log in logs.values():
        log.__enter__()
    fetched = Order.objects.get(pk=target.pk)
    for log in logs.values():
        log.__exit__(None, None, None)
    used = {alias: len(log.captured_queries) for alias, log in logs.items() if log.captured_queries}
    queries = sum(used.values())
    print(f"Order.objects.get(pk={target.pk}) -> {fetched} ran {queries} query on {list(used)}")

    section("6. a time range answered from the id index")
    since = started_at - timedelta(seconds=1)
    recent = Order.objects.on_all_shards().filter(id__time__gte=since)
    sql = str(Order.objects.using("shard_0").filter(id__time__gte=since).query)
    print(f"orders created since {since:%H:%M:%S}: {recent.count()} (no created_at column)")
    print(f"SQL on each shard: ...{sql[sql.index('WHERE') :]}")

    section("7. an audit: is every row on the database its id names?")
    call_command("uid_fields", "audit", "customers", "orders", "analytics", "tenants")

    section("8. a multi-tenant family: Tenant -> Project -> Task -> Comment")
    tenant_family(Tenant, Project, Task, Comment, User, databases.SHARDS)

    section("9. the same shop with SQLAlchemy")
    import sqlalchemy_shop

    sqlalchemy_shop.main()

    section("10. the admin")
    if not User.objects.filter(username=DEMO_USER).exists():
        User.objects.create_superuser(DEMO_USER, "demo@example.com", DEMO_PASSWORD)
    print(
        "run `make serve`, open http://127.0.0.1:8000/admin/ and log in as "
        f"{DEMO_USER} / {DEMO_PASSWORD}: the Order changelist has a shard filter, a created "
        "column decoded from the id, and each order shows its decoded parts.\n"
        "The tenants app: /admin/tenants/task/ (comments inline), and its API with "
        "django-filter at /api/tasks/?tenant=<id>."
    )


if __name__ == "__main__":
    main()
