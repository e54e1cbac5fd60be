"""Fields: plain values, filled at construction, decoded parts, stable migrations, forms."""

from __future__ import annotations

import copy
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.forms import TextInput, modelform_factory
from django.test.utils import override_settings

from uid_fields import INSTAGRAM, TWITTER, locality
from uid_fields.django import LocalityUUIDField, ShardedBigIntField, SnowflakeField, UniqIdField
from uid_fields.django.conf import get_generator

from .testapp.models import Customer, LegacyRow, Order, PageView, Photo, PhpRow, Purchase, Tag

pytestmark = pytest.mark.versions


def test_ids_exist_at_construction_and_are_plain_values() -> None:
    order = Order()
    assert type(order.id) is int and order.id > 0
    view = PageView(path="/")
    assert type(view.id) is uuid.UUID
    row = PhpRow()
    assert type(row.id) is str and len(row.id) == 18
    legacy = LegacyRow()
    assert type(legacy.id) is int and legacy.id % 10 == 3  # server digit 3


def test_parts_are_decoded_from_the_plain_value() -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    order = Order()
    parts = order.id_parts
    assert before <= parts.datetime <= datetime.now(UTC) + timedelta(seconds=1)
    assert (parts.datacenter, parts.worker) == (0, 1)
    photo = Photo(owner_id=31341)
    assert photo.id_parts.shard == Photo._meta.pk.placement.logical_shard_for_key(31341)  # type: ignore[union-attr]
    view = PageView(path="/")
    assert view.id_parts.pid >= 0 and view.id_parts.counter >= 0
    assert PhpRow().id_parts.shard in range(4)
    assert LegacyRow().id_parts.server == 3
    order.id = None
    assert order.id_parts is None


def test_shard_key_fills_the_id_once_the_key_is_known() -> None:
    photo = Photo()
    assert photo.id is None
    photo.owner_id = 42
    assert Photo._meta.pk.fill(photo) == photo.id  # type: ignore[union-attr]
    assert INSTAGRAM.field_of(photo.id, "shard") == Photo._meta.pk.placement.logical_shard_for_key(
        42
    )  # type: ignore[union-attr]


def test_values_loaded_from_the_database_are_plain(db: None) -> None:
    Tag.objects.create(name="x")
    tag = Tag.objects.get(name="x")
    assert type(tag.ref) is int and tag.ref_parts.worker == 1


def test_non_primary_key_use_generates_too(db: None) -> None:
    a, b = Tag.objects.create(name="a"), Tag.objects.create(name="b")
    assert a.ref < b.ref


def test_deconstruct_names_only_settings_keys() -> None:
    _, path, _, kwargs = Photo._meta.pk.deconstruct()  # type: ignore[union-attr]
    assert path == "uid_fields.django.ShardedBigIntField"
    assert kwargs == {
        "primary_key": True,
        "serialize": False,
        "generator": "photos",
        "shards": "main",
        "shard_key": "owner_id",
    }
    _, _, _, kwargs = Tag._meta.get_field("ref").deconstruct()
    assert kwargs == {"unique": True}
    _, path, _, kwargs = PhpRow._meta.pk.deconstruct()  # type: ignore[union-attr]
    assert path == "uid_fields.django.UniqIdField" and "max_length" not in kwargs


@pytest.mark.django_db(databases="__all__")
def test_makemigrations_twice_makes_nothing() -> None:
    out = StringIO()
    call_command("makemigrations", "testapp", "--check", "--dry-run", stdout=out, stderr=StringIO())
    assert "No changes detected" in out.getvalue()


def test_to_python_accepts_strings_ints_and_uuids_by_the_cores_rules() -> None:
    field = Order._meta.pk
    assert field.to_python("204697221847986177") == 204697221847986177
    assert field.to_python(5) == 5
    for bad in ["abc", "-1", str(2**63), "1.5"]:
        with pytest.raises(ValidationError):
            field.to_python(bad)
    view_field = PageView._meta.pk
    value = locality.compose(counter=1, pid=2, mac=3, timestamp_ms=4)
    assert view_field.to_python(str(value)) == value
    assert view_field.to_python(value) == value
    for bad_uuid in ["not-a-uuid", value.int, f" {value}", True]:  # coerce_uuid's rule
        with pytest.raises(ValidationError):
            view_field.to_python(bad_uuid)
    with pytest.raises(ValidationError, match="over a second"):
        PhpRow._meta.pk.clean("0abcd6557d8a0fffff", None)


def test_form_field_is_a_text_input_accepting_strings(db: None) -> None:
    form_class = modelform_factory(Tag, fields=["ref", "name"])
    form = form_class(data={"ref": " 204697221847986177 ", "name": "t"})
    assert isinstance(form.fields["ref"].widget, TextInput)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["ref"] == 204697221847986177
    bad = form_class(data={"ref": "12,345", "name": "t"})
    assert not bad.is_valid() and "ref" in bad.errors
    assert form_class(instance=Tag(ref=2**62, name="x"))["ref"].value() == str(2**62)


def test_one_generator_per_name_per_process() -> None:
    assert get_generator("default") is get_generator("default")
    assert Order._meta.pk.generator is Customer._meta.pk.generator  # type: ignore[union-attr]


def test_ids_of_one_generator_increase_across_models() -> None:
    ids = [Order().id, Customer().id, Order().id]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert TWITTER.replace(epoch_ms=1704067200000).decompose(ids[0]).worker == 1


def test_locality_field_uses_uuid_storage() -> None:
    field = PageView._meta.pk
    assert isinstance(field, LocalityUUIDField)
    assert field.get_internal_type() == "UUIDField"


def test_decimal_generator_stored_unsigned() -> None:
    assert LegacyRow._meta.pk.get_internal_type() == "PositiveBigIntegerField"
    assert Order._meta.pk.get_internal_type() == "BigIntegerField"


def test_field_classes_exported() -> None:
    assert {SnowflakeField, ShardedBigIntField, LocalityUUIDField, UniqIdField}
    assert Purchase._meta.pk.shard_key == "customer"  # type: ignore[union-attr]


@pytest.mark.django_db(databases="__all__")
def test_decimal_ids_are_stored_unsigned_on_mariadb() -> None:
    from django.conf import settings
    from django.db import connections

    if settings.BACKEND != "mysql":
        pytest.skip("column types checked on the MariaDB pass (UID_FIELDS_TEST_DB=mysql)")
    with connections["shard_0"].cursor() as cursor:
        cursor.execute("SHOW COLUMNS FROM testapp_legacyrow LIKE 'id'")
        column_type = cursor.fetchone()[1]
    assert column_type.lower() == "bigint(20) unsigned"
    big = LegacyRow(id=10**19 + 3, label="20 digits")  # past the signed range
    big.save(using=LegacyRow._meta.pk.shard_map.database_for(big.id))
    assert LegacyRow.objects.get(pk=10**19 + 3).label == "20 digits"


def test_new_ids_follow_a_settings_change() -> None:
    """The id maker a field keeps between objects is dropped when UID_FIELDS changes."""
    assert get_generator("default").decompose(Order().pk).worker == 1
    config = copy.deepcopy(settings.UID_FIELDS)
    config["GENERATORS"]["default"]["fields"] = {"datacenter": 0, "worker": 9}
    with override_settings(UID_FIELDS=config):
        assert get_generator("default").decompose(Order().pk).worker == 9
    assert get_generator("default").decompose(Order().pk).worker == 1
