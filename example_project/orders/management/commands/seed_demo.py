"""``manage.py seed_demo``: customers, their orders and lines, page views."""

from __future__ import annotations

import random
import time
from datetime import date, timedelta
from typing import Any

from analytics.models import PageView
from customers.models import Customer
from django.core.management.base import BaseCommand, CommandParser

from orders.models import Order, OrderLine

SKUS = ["MUG-01", "TEE-M", "TEE-L", "CAP-02", "PIN-07", "BAG-11"]
CHANNELS = ["web", "app", "phone"]
FIRST_DAY = date(2024, 1, 1)


def bar(done: int, total: int, width: int = 32) -> str:
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


class Command(BaseCommand):
    help = "Fill the shop with customers, orders (co-located with their customer) and page views."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--customers", type=int, default=200)
        parser.add_argument("--orders", type=int, default=1000, help="orders in all")
        parser.add_argument("--views", type=int, default=2000, help="page views")
        parser.add_argument(
            "--rate", type=float, default=0, help="orders per second (0: as fast as possible)"
        )
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args: Any, **options: Any) -> None:
        rng = random.Random(options["seed"])
        days = random.Random(options["seed"] + 1)  # the orders' other values stay as they were
        started = time.monotonic()
        customers = Customer.objects.bulk_create(
            [
                Customer(name=f"Customer {i}", email=f"c{i}@example.com")
                for i in range(options["customers"])
            ]
        )
        self.stdout.write(f"customers  {bar(len(customers), len(customers))}")
        total, rate, batch = options["orders"], options["rate"], 100
        made = 0
        while made < total:
            size = min(batch, total - made)
            orders = [
                Order(
                    customer=rng.choice(customers),
                    total_cents=rng.randrange(500, 20000),
                    status=rng.choice(["new", "paid", "shipped"]),
                    channel=days.choice(CHANNELS),
                    placed_on=FIRST_DAY + timedelta(days=days.randrange(0, 540)),
                )
                for _ in range(size)
            ]
            Order.objects.bulk_create(orders)
            OrderLine.objects.bulk_create(
                [
                    OrderLine(
                        order=order,
                        sku=rng.choice(SKUS),
                        quantity=rng.randrange(1, 4),
                        price_cents=rng.randrange(300, 5000),
                    )
                    for order in orders
                    for _ in range(rng.randrange(1, 4))
                ]
            )
            made += size
            self.stdout.write(f"\rorders     {bar(made, total)}", ending="")
            self.stdout.flush()
            if rate:
                time.sleep(max(0.0, made / rate - (time.monotonic() - started)))
        self.stdout.write("")
        PageView.objects.bulk_create(
            [
                PageView(
                    path=f"/products/{rng.choice(SKUS).lower()}",
                    customer_id=rng.choice(customers).pk,
                )
                for _ in range(options["views"])
            ]
        )
        self.stdout.write(f"page views {bar(options['views'], options['views'])}")
        elapsed = time.monotonic() - started
        rows = len(customers) + made + options["views"]
        self.stdout.write(f"seeded {rows} rows (plus order lines) in {elapsed:.2f} s")
