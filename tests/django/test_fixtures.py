"""Writes off a row's shard are refused; fixtures dump from and load onto every shard."""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.django.testapp.models import Coupon, Customer, Order, Purchase
from uid_fields import WrongShardError
from uid_fields.django import allow_off_shard_writes

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def _other_shard(obj: Order) -> str:
    field = Order._meta.pk
    home = field.placement.database_of(obj.pk)  # type: ignore[union-attr]
    return next(a for a in field.placement.databases if a != home)  # type: ignore[union-attr]


def test_save_using_another_shard_raises_naming_both_databases() -> None:
    order = Order(note="x")
    wrong = _other_shard(order)
    home = Order._meta.pk.placement.database_of(order.pk)  # type: ignore[union-attr]
    with pytest.raises(WrongShardError) as caught:
        order.save(using=wrong)
    assert isinstance(caught.value, ValueError)
    assert wrong in str(caught.value) and home in str(caught.value)
    assert not Order.objects.using(wrong).filter(pk=order.pk).exists()
    with pytest.raises(WrongShardError):
        Order.save_base(order, raw=True, using=wrong)
    with allow_off_shard_writes():  # the explicit opt-out
        order.save(using=wrong)
    assert Order.objects.using(wrong).filter(pk=order.pk).exists()


def _fixture(tmp_path: Path) -> tuple[Path, list[Order]]:
    placement = Order._meta.pk.placement  # type: ignore[union-attr]
    orders = [Order(note=str(i)) for i in range(24)]
    while len({placement.database_of(o.pk) for o in orders}) < 4:  # rows of every shard
        orders.append(Order(note=str(len(orders))))
    data = [{"model": "testapp.order", "pk": o.pk, "fields": {"note": o.note}} for o in orders]
    data.append({"model": "testapp.coupon", "pk": 1, "fields": {"code": "FIX"}})
    path = tmp_path / "orders.json"
    path.write_text(json.dumps(data))
    return path, orders


def test_loaddata_onto_one_shard_refuses_rows_of_the_others(tmp_path: Path) -> None:
    path, _orders = _fixture(tmp_path)
    with pytest.raises(WrongShardError):
        call_command("loaddata", str(path), database="shard_1", verbosity=0)
    assert Order.objects.on_all_shards().count() == 0


def test_uid_fields_loaddata_puts_every_row_on_its_shard(tmp_path: Path) -> None:
    path, orders = _fixture(tmp_path)
    out = StringIO()
    call_command("uid_fields", "loaddata", str(path), stdout=out)
    assert f"installed {len(orders) + 1} rows" in out.getvalue()
    for order in orders:
        home = Order._meta.pk.placement.database_of(order.pk)  # type: ignore[union-attr]
        assert Order.objects.using(home).filter(pk=order.pk).exists()
    assert Order.objects.on_all_shards().count() == len(orders)  # no row twice
    assert Coupon.objects.using("default").get(pk=1).code == "FIX"
    with pytest.raises(CommandError, match="no such fixture"):
        call_command("uid_fields", "loaddata", str(tmp_path / "missing.json"))


def test_uid_fields_dumpdata_covers_every_shard_and_round_trips(tmp_path: Path) -> None:
    customers = [Customer.objects.create(name=f"c{i}") for i in range(8)]
    purchases = [Purchase.objects.create(customer=c, total=i) for i, c in enumerate(customers)]
    plain = StringIO()
    call_command("dumpdata", "testapp.Order", stdout=plain)
    out = StringIO()
    call_command("uid_fields", "dumpdata", "testapp.Customer", "testapp.Purchase", stdout=out)
    rows = json.loads(out.getvalue())
    assert Counter(r["model"] for r in rows) == {"testapp.customer": 8, "testapp.purchase": 8}
    assert [r["model"] for r in rows].index("testapp.purchase") > 0  # parents first
    path = tmp_path / "dump.json"
    path.write_text(out.getvalue())
    Purchase.objects.on_all_shards().delete()
    Customer.objects.on_all_shards().delete()
    call_command("uid_fields", "loaddata", str(path), stdout=StringIO())
    for purchase in purchases:
        loaded = Purchase.objects.get(pk=purchase.pk)
        assert loaded._state.db == purchase._state.db == loaded.customer._state.db
