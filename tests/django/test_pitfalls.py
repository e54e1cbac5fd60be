"""One test per pitfall of the Django checklist (numbered as in the design notes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from django.db.models.signals import pre_save

from uid_fields.django import ShardRouter, ShardRoutingError

from .helpers import capture_all
from .testapp.models import Customer, Order, PageView, Photo, PhpRow, Purchase, Tag

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]


def shard_of(obj: object) -> str:
    field = type(obj)._meta.pk
    return field.shard_map.database_for(field.value_from_object(obj))  # type: ignore[union-attr]


def test_01_the_id_exists_before_routing() -> None:
    order = Order()
    assert order.id is not None
    assert ShardRouter().db_for_write(Order, instance=order) == shard_of(order)


@pytest.mark.parametrize(
    "make", [lambda: Order(), lambda: Photo(owner_id=5), lambda: Tag(name="t")]
)
def test_02_plain_save_is_one_insert_without_an_update_first(make: object) -> None:
    obj = make()  # type: ignore[operator]
    with capture_all() as log:
        obj.save()
    assert log.count() == 1 and log.count(verb="INSERT") == 1 and log.count(verb="UPDATE") == 0


def test_03_manager_writes_route_by_the_new_instance() -> None:
    created = Order.objects.create()
    fetched, _ = Order.objects.get_or_create(note="p3")
    updated, _ = Order.objects.update_or_create(note="p3b", defaults={"note": "p3b"})
    bulk = Order.objects.bulk_create([Order() for _ in range(8)])
    for obj in [created, fetched, updated, *bulk]:
        assert obj._state.db == shard_of(obj)
        assert Order.objects.using(shard_of(obj)).filter(pk=obj.pk).exists()


def test_04_unhinted_gets_and_unique_checks_are_routed() -> None:
    order = Order.objects.create(note="x")
    with capture_all() as log:
        Order.objects.get(id=order.id)  # admin and DRF filter by the field name
        order.full_clean()  # validate_unique queries the default manager without hints
    assert log.aliases() == {shard_of(order)}


def test_05_related_instance_hints_are_another_model() -> None:
    customer = Customer.objects.create(name="c")
    assert ShardRouter().db_for_read(Purchase, instance=customer) == customer._state.db


def test_06_narrowing_a_clone_never_changes_the_parent() -> None:
    order = Order.objects.create()
    parent = Order.objects.all()
    child = parent.filter(pk=order.pk)
    assert child.shard_aliases == (shard_of(order),)
    assert parent._shard_aliases is None
    with pytest.raises(ShardRoutingError):
        list(parent)


def test_07_pre_save_signal_sees_the_shard_and_the_id() -> None:
    seen: list[tuple[str, int]] = []

    def receiver(sender: type, instance: Order, using: str, **kwargs: object) -> None:
        seen.append((using, instance.id))

    pre_save.connect(receiver, sender=Order)
    try:
        order = Order()
        order.save()
    finally:
        pre_save.disconnect(receiver, sender=Order)
    assert seen == [(shard_of(order), order.id)]


def test_08_bulk_created_objects_know_their_shard() -> None:
    objs = Order.objects.bulk_create([Order() for _ in range(20)])
    assert all(o._state.db == shard_of(o) and not o._state.adding for o in objs)


@pytest.mark.skipif(not settings.DATABASE_IDS, reason="database-made ids: PostgreSQL, Django 5.0+")
def test_09_bulk_create_with_database_made_keys_returns_ids() -> None:
    from .pgapp.models import DbPhoto

    photos = DbPhoto.objects.bulk_create([DbPhoto(owner_id=1), DbPhoto(owner_id=2)])
    assert all(isinstance(p.id, int) for p in photos)


def test_10_no_default_in_the_column_type_or_foreign_keys() -> None:
    connection = connections["shard_0"]
    assert "DEFAULT" not in Order._meta.pk.db_type(connection).upper()  # type: ignore[union-attr]
    fk_type = Purchase._meta.get_field("customer").db_type(connection)
    assert fk_type == Customer._meta.pk.db_type(connection)  # type: ignore[union-attr]


def test_11_no_callable_default_reaches_migrations() -> None:
    for model in (Order, Photo, PageView, PhpRow, Tag):
        for field in model._meta.concrete_fields:
            _, _, _, kwargs = field.deconstruct()
            assert "default" not in kwargs and "db_default" not in kwargs


def test_12_values_come_back_as_the_right_python_types() -> None:
    view = PageView.objects.create(path="/")
    loaded = PageView.objects.get(pk=view.pk)
    assert type(loaded.pk) is uuid.UUID and loaded.pk == view.pk
    order = Order.objects.create()
    assert type(Order.objects.get(pk=order.pk).pk) is int


def test_13_values_are_not_wrapper_objects() -> None:
    order = Order.objects.create(note="n")
    row = Order.objects.filter(pk=order.pk).values("id", "note").get()
    assert json.loads(json.dumps(row)) == {"id": order.id, "note": "n"}
    assert str(PageView(path="/").pk).count("-") == 4


def test_14_ids_exceed_javascript_safe_integers() -> None:
    # Why every JSON surface must offer strings (the DRF/JSON helpers live with the admin).
    assert Order().id > 2**53 - 1


def test_15_ids_render_without_separators_in_forms() -> None:
    from django.forms import modelform_factory
    from django.test.utils import override_settings

    with override_settings(USE_THOUSAND_SEPARATOR=True):
        form = modelform_factory(Tag, fields=["ref"])(instance=Tag(ref=1234567890123, name="x"))
        assert 'value="1234567890123"' in str(form["ref"])


def test_16_routing_does_not_depend_on_hash_randomisation(tmp_path: Path) -> None:
    ids = [Order().id for _ in range(20)]
    here = [shard_of(Order(id=i)) for i in ids]
    script = (
        "import django, json, sys; django.setup()\n"
        "from tests.django.testapp.models import Order\n"
        "m = Order._meta.pk.shard_map\n"
        "print(json.dumps([m.database_for(i) for i in json.loads(sys.argv[1])]))\n"
    )
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, DJANGO_SETTINGS_MODULE="tests.django.settings")
        out = subprocess.run(
            [sys.executable, "-c", script, json.dumps(ids)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parents[2],
        ).stdout
        assert json.loads(out) == here


def test_17_migrations_hold_no_database_aliases() -> None:
    migration = Path(__file__).parent / "testapp" / "migrations" / "0001_initial.py"
    text = migration.read_text()
    assert "shard_0" not in text and "2024-01-01" not in text and "worker" not in text


def test_18_settings_are_read_lazily() -> None:
    from django.test.utils import override_settings

    config = {**settings.UID_FIELDS, "SHARDS": {"main": {"databases": ["shard_3"]}}}
    order = Order()
    with override_settings(UID_FIELDS=config):
        assert shard_of(order) == "shard_3"
    assert shard_of(order) in settings.SHARDS


def test_19_bad_settings_fail_checks_not_imports() -> None:
    from django.db import models
    from django.test.utils import isolate_apps, override_settings

    from uid_fields.django import SnowflakeField
    from uid_fields.django.checks import check_settings

    bad = {"GENERATORS": {"x": {"kind": "snowflake", "fields": {"worker": 99}}}}
    with override_settings(UID_FIELDS=bad), isolate_apps("tests.django.testapp"):

        class Late(models.Model):  # declaring a model never validates settings
            id = SnowflakeField(primary_key=True, generator="x")

            class Meta:
                app_label = "testapp"

        assert [m.id for m in check_settings()] == ["uid_fields.E005"]
        assert [m.id for m in Late._meta.pk.check()] == ["uid_fields.E005"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_20_a_forked_worker_never_reuses_the_parents_static_worker_id() -> None:
    Order()  # the generator exists in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            Order()
            message = "issued"
        except Exception as exc:
            message = type(exc).__name__
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 100).decode() == "ForkedGeneratorError"


def test_21_char_primary_keys_are_generated_not_empty() -> None:
    row = PhpRow()
    assert row.pk and len(row.pk) == 18
    row.save()
    assert PhpRow.objects.get(pk=row.pk)._state.db == shard_of(row)


def test_22_allow_migrate_uses_only_meta() -> None:
    from django.db.migrations.loader import MigrationLoader

    state = MigrationLoader(connections["default"]).project_state(("testapp", "0001_initial"))
    historical = state.apps.get_model("testapp", "Photo")
    assert historical is not Photo and not hasattr(historical, "objects_sharded")
    router = ShardRouter()
    assert router.allow_migrate("shard_1", "testapp", "photo", model=historical) is True
    assert router.allow_migrate("default", "testapp", "photo", model=historical) is False
    assert router.allow_migrate("shard_1", "testapp", None) is None


def test_23_function_state_survives_a_rerun() -> None:
    from uid_fields.sql import NextIdFunction

    ddl = NextIdFunction(Photo._meta.pk.layout, shard=0).create_statements()  # type: ignore[union-attr, arg-type]
    assert ddl[0].startswith("CREATE SEQUENCE IF NOT EXISTS")
    assert all("DROP" not in s and "setval('uid_next_id_state', 0" not in s for s in ddl)


def test_24_no_id_is_made_while_preparing_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    from uid_fields import ManualClock, SnowflakeGenerator
    from uid_fields.django import conf

    field = Order._meta.pk
    layout = field.layout  # type: ignore[union-attr]
    frozen = SnowflakeGenerator(layout, worker=1, clock=ManualClock(layout.epoch_ms + 10**9))
    monkeypatch.setitem(conf._generators, "default", frozen)
    first = frozen.next_id()
    assert field.get_prep_value(None) is None
    assert field.get_prep_value(str(first)) == first
    assert not Order.objects.on_all_shards().filter(pk=None).exists()
    assert frozen.next_id() == first + 1  # nothing above consumed an id
