"""System checks: each misconfiguration has an id, read lazily under override_settings."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.conf import settings
from django.core import checks
from django.db import models
from django.test.utils import isolate_apps, override_settings
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from tests.settings_values import GENERATOR_ENTRY, SHARD_MAP_ENTRY, WORDS, json_like
from uid_fields.django import ShardedBigIntField, ShardedManager, SnowflakeField
from uid_fields.django.checks import check_managers, check_settings, manager_errors


def uid_settings(**changes: Any) -> dict[str, Any]:
    config = copy.deepcopy(settings.UID_FIELDS)
    for key, value in changes.items():
        config[key] = value
    return config


def ids(messages: list[checks.CheckMessage]) -> set[str]:
    return {m.id for m in messages if m.id}


def test_the_test_project_is_clean() -> None:
    assert ids(check_settings()) == set()
    assert ids(check_managers()) == set()


def test_invalid_generators_are_e005() -> None:
    generators = dict(settings.UID_FIELDS["GENERATORS"])
    generators["bad_epoch"] = {"kind": "snowflake", "epoch": "2999-01-01"}
    generators["bad_worker"] = {"kind": "snowflake", "fields": {"worker": 99}}
    generators["bad_kind"] = {"kind": "ulid"}
    generators["bad_layout"] = {
        "kind": "snowflake",
        "layout": {"time_bits": 60, "fields": [["w", 10]]},
    }
    generators["bad_fields"] = {"kind": "locality", "fields": {"worker": 3}}
    with override_settings(UID_FIELDS=uid_settings(GENERATORS=generators)):
        messages = [m for m in check_settings() if m.id == "uid_fields.E005"]
    text = " ".join(m.msg for m in messages)
    assert len(messages) == 5
    assert "in the future" in text and "worker=99" in text and "ulid" in text and "bits" in text
    assert "takes no node fields, not ['worker']" in text


def test_exhaustion_within_five_years_is_w001() -> None:
    generators = dict(settings.UID_FIELDS["GENERATORS"])
    generators["old"] = {"kind": "sharded", "layout": "instagram"}  # signed: ends 2046
    # 2**38 ms (8.7 years) from 2020: ends in 2028.
    generators["ancient"] = {
        "kind": "snowflake",
        "epoch": "2020-01-01",
        "layout": {"time_bits": 38, "fields": [["worker", 10]], "sequence_bits": 12},
    }
    with override_settings(UID_FIELDS=uid_settings(GENERATORS=generators)):
        warnings = [m for m in check_settings() if m.id == "uid_fields.W001"]
    assert len(warnings) == 1 and "'ancient'" in warnings[0].msg and "2028" in warnings[0].msg


def test_missing_database_alias_is_e003() -> None:
    shards = {"main": {"databases": ["shard_0", "nowhere"]}}
    with override_settings(UID_FIELDS=uid_settings(SHARDS=shards)):
        assert "uid_fields.E003" in ids(check_settings())


@isolate_apps("tests.django.testapp")
def test_field_checks() -> None:
    class Broken(models.Model):
        id = SnowflakeField(primary_key=True, generator="missing", shards="main")

        class Meta:
            app_label = "testapp"

    class WrongKind(models.Model):
        id = SnowflakeField(primary_key=True, generator="photos")

        class Meta:
            app_label = "testapp"

    class NoMap(models.Model):
        id = SnowflakeField(primary_key=True, shards="absent")

        class Meta:
            app_label = "testapp"

    class BadKey(models.Model):
        id = ShardedBigIntField(primary_key=True, generator="photos", shard_key="owner")

        class Meta:
            app_label = "testapp"

    class Clash(models.Model):
        id = SnowflakeField(primary_key=True)

        def id_parts(self) -> None: ...

        class Meta:
            app_label = "testapp"

    assert ids(Broken._meta.pk.check()) == {"uid_fields.E001"}
    assert ids(WrongKind._meta.pk.check()) == {"uid_fields.E006"}
    assert ids(NoMap._meta.pk.check()) == {"uid_fields.E002"}
    assert ids(BadKey._meta.pk.check()) == {"uid_fields.E008"}
    assert ids(Clash._meta.pk.check()) == {"uid_fields.E010"}


@isolate_apps("tests.django.testapp")
def test_default_manager_must_be_sharded() -> None:
    class Plain(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")

        class Meta:
            app_label = "testapp"

    class Routed(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    assert [m.obj for m in manager_errors([Plain, Routed])] == [Plain]
    assert manager_errors([Plain])[0].id == "uid_fields.E007"


@isolate_apps("tests.django.testapp")
def test_a_followers_default_manager_must_be_sharded_too() -> None:
    """A follower is routed by its parent's id only through a ShardedManager."""
    from tests.django.testapp.models import Order

    class PlainLine(models.Model):
        id = SnowflakeField(primary_key=True)
        order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="+")

        class Meta:
            app_label = "testapp"

    class RoutedLine(models.Model):
        id = SnowflakeField(primary_key=True)
        order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="+")
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    (error,) = manager_errors([PlainLine, RoutedLine])
    assert error.id == "uid_fields.E007" and error.obj is PlainLine
    assert "filter(order=...)" in error.msg


@pytest.mark.skipif(settings.BACKEND == "postgres", reason="the shards here are PostgreSQL")
@isolate_apps("tests.django.testapp")
def test_database_default_needs_postgresql() -> None:
    class Made(models.Model):
        id = ShardedBigIntField(
            primary_key=True,
            generator="photos",
            shards="main",
            shard_key="k",
            database_default=True,
        )
        k = models.IntegerField()

        class Meta:
            app_label = "testapp"

    assert "uid_fields.E009" in ids(Made._meta.pk.check())


def test_override_settings_is_read_lazily() -> None:
    from uid_fields.django.conf import get_generator

    before = get_generator("default")
    generators = dict(settings.UID_FIELDS["GENERATORS"])
    generators["default"] = dict(generators["default"], fields={"datacenter": 0, "worker": 9})
    with override_settings(UID_FIELDS=uid_settings(GENERATORS=generators)):
        assert get_generator("default").node == {"datacenter": 0, "worker": 9}
    assert get_generator("default") is not before
    assert get_generator("default").node == {"datacenter": 0, "worker": 1}


@isolate_apps("tests.django.testapp")
def test_foreign_keys_across_shards_are_e011() -> None:
    from uid_fields.django.checks import relation_errors

    from .testapp.models import Customer

    class Loose(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        customer = models.ForeignKey(Customer, on_delete=models.CASCADE)

        class Meta:
            app_label = "testapp"

    class Soft(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        customer = models.ForeignKey(Customer, on_delete=models.CASCADE, db_constraint=False)

        class Meta:
            app_label = "testapp"

    class Together(models.Model):
        id = ShardedBigIntField(
            primary_key=True, generator="photos", shards="main", shard_key="customer"
        )
        customer = models.ForeignKey(Customer, on_delete=models.CASCADE)

        class Meta:
            app_label = "testapp"

    errors = relation_errors([Loose, Soft, Together])
    # The CASCADE across databases runs on each shard (uid_fields.django.relations.deletion).
    assert [(e.id, e.obj) for e in errors] == [
        ("uid_fields.E011", Loose._meta.get_field("customer")),
    ]
    assert ids(check_managers()) == set()  # the test project itself is clean


@isolate_apps("tests.django.testapp")
def test_many_to_many_relations_of_sharded_rows_are_e015() -> None:
    from uid_fields.django.checks import relation_errors

    from .testapp.models import Coupon, Customer

    class Wishlist(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        customers = models.ManyToManyField(Customer)

        class Meta:
            app_label = "testapp"

    class Campaign(models.Model):  # an ordinary model linking sharded rows
        customers = models.ManyToManyField(Customer)
        coupons = models.ManyToManyField(Coupon)  # ordinary to ordinary: fine

        class Meta:
            app_label = "testapp"

    errors = relation_errors([Wishlist, Campaign])
    assert [(e.id, e.obj) for e in errors] == [
        ("uid_fields.E015", Wishlist._meta.get_field("customers")),
        ("uid_fields.E015", Campaign._meta.get_field("customers")),
    ]


def DB_CASCADE(collector: Any, field: Any, sub_objs: Any, using: str) -> None:
    """Stands for Django's database-level on_delete (an ON DELETE clause)."""


@isolate_apps("tests.django.testapp")
def test_on_delete_only_a_database_can_run_across_databases_is_e017() -> None:
    from uid_fields.django.checks import relation_errors

    from .testapp.models import Coupon, Customer

    class Memo(models.Model):  # ordinary, on default, pointing at a sharded row
        customer = models.ForeignKey(Customer, on_delete=models.CASCADE, db_constraint=False)
        quiet = models.ForeignKey(
            Customer, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
        )
        in_database = models.ForeignKey(
            Customer, on_delete=DB_CASCADE, db_constraint=False, related_name="+"
        )

        class Meta:
            app_label = "testapp"

    class Cart(models.Model):  # sharded, pointing at an ordinary row
        id = SnowflakeField(primary_key=True, shards="main")
        coupon = models.ForeignKey(
            Coupon, null=True, on_delete=models.SET_NULL, db_constraint=False
        )

        class Meta:
            app_label = "testapp"

    class Line(models.Model):  # co-located: the database runs it on one database
        id = ShardedBigIntField(
            primary_key=True, generator="photos", shards="main", shard_key="customer"
        )
        customer = models.ForeignKey(Customer, on_delete=DB_CASCADE)

        class Meta:
            app_label = "testapp"

    # CASCADE and SET_NULL across databases run in Python on every database holding
    # referring rows (tests/django/test_deletes_across.py); an ON DELETE clause cannot.
    errors = relation_errors([Memo, Cart, Line])
    assert [(e.id, e.obj) for e in errors] == [
        ("uid_fields.E017", Memo._meta.get_field("in_database")),
    ]
    assert "CASCADE" in errors[0].hint  # type: ignore[operator]


def test_two_generators_with_the_same_node_are_e012() -> None:
    generators = dict(settings.UID_FIELDS["GENERATORS"])
    generators["twin"] = dict(generators["default"])
    generators["other_worker"] = dict(generators["default"], fields={"datacenter": 0, "worker": 2})
    with override_settings(UID_FIELDS=uid_settings(GENERATORS=generators)):
        errors = [m for m in check_settings() if m.id == "uid_fields.E012"]
    assert len(errors) == 1 and "'default' and 'twin'" in errors[0].msg


# -- mistakes in the shape of UID_FIELDS: each one a check with an id, never a traceback --


def messages_for(config: object) -> list[checks.CheckMessage]:
    with override_settings(UID_FIELDS=config):
        return [m for m in check_settings() if m.id != "uid_fields.W001"]


def test_a_misspelt_generator_option_is_e013() -> None:
    generators = copy.deepcopy(settings.UID_FIELDS["GENERATORS"])
    generators["default"]["max_backwards_ms"] = 5
    [message] = messages_for(uid_settings(GENERATORS=generators))
    assert message.id == "uid_fields.E013"
    assert message.msg.startswith("UID_FIELDS.GENERATORS.default.max_backwards_ms: ")


def test_a_misspelt_top_level_key_is_e013() -> None:
    [message] = messages_for(uid_settings(STRICT_ROUTNG=False))
    assert message.id == "uid_fields.E013"
    assert message.msg.startswith("UID_FIELDS.STRICT_ROUTNG: ")


def test_a_misspelt_shard_map_key_is_e013() -> None:
    shards = {"main": {"databases": settings.SHARDS, "route_bye": "worker"}}
    [message] = messages_for(uid_settings(SHARDS=shards))
    assert message.id == "uid_fields.E013"
    assert message.msg.startswith("UID_FIELDS.SHARDS.main.route_bye: ")


def test_a_string_flag_is_e014_and_reads_as_the_default() -> None:
    from uid_fields.django.conf import conf

    [message] = messages_for(uid_settings(STRICT_ROUTING="no"))
    assert message.id == "uid_fields.E014"
    assert message.msg.startswith("UID_FIELDS.STRICT_ROUTING: ")
    with override_settings(UID_FIELDS=uid_settings(STRICT_ROUTING="no")):
        assert conf.STRICT_ROUTING is True


def test_a_nan_clock_tolerance_is_e014() -> None:
    generators = copy.deepcopy(settings.UID_FIELDS["GENERATORS"])
    generators["default"]["max_backward_ms"] = float("nan")
    [message] = messages_for(uid_settings(GENERATORS=generators))
    assert message.id == "uid_fields.E014"
    assert message.msg.startswith("UID_FIELDS.GENERATORS.default.max_backward_ms: ")


def test_a_list_of_generators_is_e014() -> None:
    listed = list(settings.UID_FIELDS["GENERATORS"].values())
    [message] = messages_for(uid_settings(GENERATORS=listed))
    assert message.id == "uid_fields.E014"
    assert message.msg.startswith("UID_FIELDS.GENERATORS: ")


@pytest.mark.parametrize("bad", [["GENERATORS"], "snowflake", None])
def test_uid_fields_that_is_not_a_dict_is_e014(bad: object) -> None:
    from uid_fields.django.conf import conf, shard_databases

    [message] = messages_for(bad)
    assert message.id == "uid_fields.E014"
    assert message.msg.startswith("UID_FIELDS: ")
    with override_settings(UID_FIELDS=bad):  # the accessors read defaults, never raise
        assert conf.GENERATORS == {} and conf.SHARDS == {} and shard_databases() == set()
        assert conf.STRICT_ROUTING is True and conf.DRF_STRING_IDS is False


@isolate_apps("tests.django.testapp")
def test_a_field_whose_generator_entry_is_misspelt_reports_it() -> None:
    generators = copy.deepcopy(settings.UID_FIELDS["GENERATORS"])
    generators["default"]["feilds"] = {"worker": 2}
    with override_settings(UID_FIELDS=uid_settings(GENERATORS=generators)):

        class Typo(models.Model):
            id = SnowflakeField(primary_key=True, shards="main")

            class Meta:
                app_label = "testapp"

        [message] = Typo._meta.pk.check()
    assert message.id == "uid_fields.E013"
    assert "UID_FIELDS.GENERATORS.default.feilds" in message.msg


def test_get_generator_is_public() -> None:
    import uid_fields.django
    from uid_fields.django.conf import get_generator

    assert uid_fields.django.get_generator is get_generator
    assert uid_fields.django.get_generator("default").node == {"datacenter": 0, "worker": 1}


def test_a_sharded_generator_unsafe_across_processes_is_e016() -> None:
    unsafe = copy.deepcopy(settings.UID_FIELDS)
    del unsafe["GENERATORS"]["photos"]["single_process"]
    with override_settings(UID_FIELDS=unsafe):
        [message] = [m for m in check_settings() if m.id == "uid_fields.E016"]
        assert "photos" in message.msg and "single_process" in message.msg
    for safe in ({"single_process": True}, {"sequence": {"redis": "redis://127.0.0.1:6379/0"}}):
        fixed = copy.deepcopy(unsafe)
        fixed["GENERATORS"]["photos"].update(safe)
        with override_settings(UID_FIELDS=fixed):
            assert "uid_fields.E016" not in ids(check_settings())


@isolate_apps("tests.django.testapp")
def test_a_function_name_that_is_no_sql_identifier_is_e018() -> None:
    class Injected(models.Model):
        id = ShardedBigIntField(
            primary_key=True,
            generator="photos",
            shards="main",
            function="uid_next_id(); DROP TABLE x; --",
        )
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    assert "uid_fields.E018" in ids(Injected._meta.pk.check())  # type: ignore[union-attr]


@isolate_apps("tests.django.testapp")
def test_generic_relations_touching_sharded_rows_are_e019() -> None:
    from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
    from django.contrib.contenttypes.models import ContentType

    from uid_fields.django.checks import relation_errors

    class Sticker(models.Model):  # ordinary: a generic key of its own is fine
        content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
        object_id = models.BigIntegerField()
        target = GenericForeignKey("content_type", "object_id")

        class Meta:
            app_label = "testapp"

    class Board(models.Model):  # sharded, holding a generic key and a generic relation
        id = SnowflakeField(primary_key=True, shards="main")
        content_type = models.ForeignKey(
            ContentType, on_delete=models.DO_NOTHING, db_constraint=False
        )
        object_id = models.BigIntegerField()
        target = GenericForeignKey("content_type", "object_id")
        stickers = GenericRelation(Sticker)
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    found = [(e.id, e.obj.name) for e in relation_errors([Sticker, Board])]
    assert ("uid_fields.E019", "target") in found and ("uid_fields.E019", "stickers") in found
    assert not [e for e in relation_errors([Sticker]) if e.id == "uid_fields.E019"]


@isolate_apps("tests.django.testapp")
def test_a_plain_generic_key_that_may_point_at_sharded_rows_is_w019() -> None:
    """Django's own GenericForeignKey reads the content type on the target's shard; the
    one of uid_fields.django.generic reads it on default and is not warned about."""
    from django.contrib.contenttypes.fields import GenericForeignKey, GenericRelation
    from django.contrib.contenttypes.models import ContentType

    from uid_fields.django import generic
    from uid_fields.django.checks import relation_errors

    class PlainPin(models.Model):
        content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
        object_id = models.CharField(max_length=40)
        target = GenericForeignKey("content_type", "object_id")

        class Meta:
            app_label = "testapp"

    class RoutedPin(models.Model):
        content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
        object_id = models.CharField(max_length=40)
        target = generic.GenericForeignKey("content_type", "object_id")

        class Meta:
            app_label = "testapp"

    class Pinned(models.Model):  # sharded, with a generic relation to the routed pins
        id = SnowflakeField(primary_key=True, shards="main")
        pins = GenericRelation(RoutedPin)
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

    messages = relation_errors([PlainPin, RoutedPin, Pinned])
    found = {(m.id, m.obj.model.__name__, m.obj.name) for m in messages}
    assert ("uid_fields.W019", "PlainPin", "target") in found
    assert not any(model == "RoutedPin" for _id, model, _name in found)
    (refused,) = [m for m in messages if m.obj.name == "pins"]
    assert refused.id == "uid_fields.E019" and isinstance(refused, checks.Error)
    assert "RoutedPin.objects.filter(" in refused.hint
    warning = next(m for m in messages if m.id == "uid_fields.W019")
    assert isinstance(warning, checks.Warning)
    assert "uid_fields.django.generic.GenericForeignKey" in warning.hint
    # Without models on shards, a plain generic key is none of uid_fields' business.
    assert not [m for m in relation_errors([PlainPin, RoutedPin]) if m.id.endswith("19")]


# -- any value at all: check messages, never an exception ------------------------------------


def every_check() -> list[checks.CheckMessage]:
    """check_settings and the checks of every uid field of the test project."""
    from django.apps import apps

    from uid_fields.django.fields import UidField

    messages = list(check_settings())
    for model in apps.get_models():
        for field in model._meta.local_fields:
            if isinstance(field, UidField):
                messages += field.check()
    return messages


@pytest.mark.parametrize(
    ("generators", "shards", "path"),
    [
        ({"photos": {"shard_field": {}}}, {}, "GENERATORS.photos.shard_field"),
        ({"photos": {"shard_field": [5, 3]}}, {}, "GENERATORS.photos.shard_field"),
        ({"default": {"fields": {"worker": {"lease": []}}}}, {}, "GENERATORS.default.fields"),
        ({"legacy": {"epoch": 2**63}}, {}, "GENERATORS.legacy.epoch"),
        ({"default": {"epoch": "9999-12-31T23:59:59-14:00"}}, {}, "GENERATORS.default.epoch"),
        ({}, {"logical_shards": 3_978_134_014}, "SHARDS.main.logical_shards"),
    ],
)
def test_a_malformed_value_is_a_check_error_at_its_key(
    generators: dict[str, dict[str, Any]], shards: dict[str, Any], path: str
) -> None:
    config = uid_settings()
    for name, changes in generators.items():
        config["GENERATORS"][name].update(changes)
    config["SHARDS"]["main"].update(shards)
    with override_settings(UID_FIELDS=config):
        messages = every_check()
    assert any(m.id in ("uid_fields.E004", "uid_fields.E005", "uid_fields.E014") for m in messages)
    assert any(f"UID_FIELDS.{path}" in m.msg for m in messages), [m.msg for m in messages]


def test_a_field_of_an_unknown_generator_among_keys_of_any_type() -> None:
    generators = {**settings.UID_FIELDS["GENERATORS"], 1: {"kind": "snowflake"}, None: {}}
    del generators["events"]
    with override_settings(UID_FIELDS=uid_settings(GENERATORS=generators, SHARDS={2: {}})):
        found = ids(every_check())
    assert {"uid_fields.E001", "uid_fields.E014"} <= found


@hyp_settings(max_examples=60)
@given(
    json_like(16)
    | st.dictionaries(st.sampled_from(WORDS[:4]), json_like(16))
    | st.builds(
        lambda entry: uid_settings(
            GENERATORS={**settings.UID_FIELDS["GENERATORS"], "photos": entry}
        ),
        GENERATOR_ENTRY,
    )
    | st.builds(lambda entry: uid_settings(SHARDS={"main": entry}), SHARD_MAP_ENTRY)
)
def test_any_uid_fields_value_gives_check_messages_never_an_exception(value: object) -> None:
    with override_settings(UID_FIELDS=value):
        messages = every_check()
    assert all(isinstance(m, checks.CheckMessage) for m in messages)


@pytest.mark.parametrize(
    ("key", "bad"), [("FAN_OUT_CONCURRENCY", -2), ("FAN_OUT_OFFSET_WARNING", "deep")]
)
def test_a_bad_fan_out_bound_is_e014_and_reads_as_the_default(key: str, bad: object) -> None:
    from uid_fields.django.conf import conf

    [message] = messages_for(uid_settings(**{key: bad}))
    assert message.id == "uid_fields.E014"
    assert message.msg.startswith(f"UID_FIELDS.{key}: ")
    with override_settings(UID_FIELDS=uid_settings(**{key: bad})):
        assert conf.FAN_OUT_CONCURRENCY is None  # the pool's default
        assert conf.FAN_OUT_OFFSET_WARNING == 1000
