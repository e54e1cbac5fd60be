"""``make demo``: set up the shop's shards, seed them, and show where every row went.

Runs on SQLite files by default (nothing to install); ``EXAMPLE_DB=postgres`` or
``EXAMPLE_DB=mysql`` puts the four shards on a local server.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")

import django  # noqa: E402

DEMO_USER, DEMO_PASSWORD = "demo", "demo-password"


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


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

    section(f"1. migrate default + {len(databases.SHARDS)} shards ({databases.BACKEND})")
    call_command("uid_fields", "migrate-all", verbosity=0)
    for alias in databases.SHARDS:  # start from empty shards, so every run shows the same
        for model in (OrderLine, Order, Customer, PageView):
            model.objects.using(alias).all().delete()

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
    call_command("uid_fields", "audit", "customers", "orders", "analytics")

    section("8. the same shop with SQLAlchemy")
    import sqlalchemy_shop

    sqlalchemy_shop.main()

    section("9. the admin")
    if not User.objects.filter(username=DEMO_USER).exists():
        User.objects.create_superuser(DEMO_USER, "demo@example.com", DEMO_PASSWORD)
    print(
        "run `make serve`, open http://127.0.0.1:8000/admin/ and log in as "
        f"{DEMO_USER} / {DEMO_PASSWORD}: the Order changelist has a shard filter, a created "
        "column decoded from the id, and each order shows its decoded parts."
    )


if __name__ == "__main__":
    main()
