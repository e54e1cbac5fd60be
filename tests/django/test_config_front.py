"""Django's settings go through the core's ``UidConfig``: what ``manage.py check`` refuses
is refused at first use too, since a WSGI worker runs no system checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import models
from django.test.utils import isolate_apps, override_settings

import uid_fields.django
from tests.django.testapp.models import Photo
from uid_fields import ConfigurationError, ShardedIdGenerator
from uid_fields.django.checks import check_settings
from uid_fields.django.conf import get_generator, get_shard_map


def unsafe_photos() -> dict[str, Any]:
    """The test settings with 'photos' in the form E016 refuses: Instagram ids made in
    Python with a per-process sequence, neither single-process nor a shared sequence."""
    config: dict[str, Any] = copy.deepcopy(settings.UID_FIELDS)
    config["GENERATORS"]["photos"] = {
        "kind": "sharded",
        "layout": "instagram",
        "epoch": "2024-01-01T00:00:00Z",
    }
    return config


def test_a_generator_the_checks_refuse_is_refused_at_first_use() -> None:
    with override_settings(UID_FIELDS=unsafe_photos()):
        assert "uid_fields.E016" in {m.id for m in check_settings()}
        for get in (get_generator, uid_fields.django.get_generator):
            with pytest.raises(ConfigurationError, match=r"GENERATORS\.photos: .*E016"):
                get("photos")
        with pytest.raises(ConfigurationError, match="E016"):
            Photo(owner_id=7)  # the id is made as soon as the shard key is known
        assert get_generator("default").node == {"datacenter": 0, "worker": 1}  # type: ignore[union-attr]
    assert isinstance(get_generator("photos"), ShardedIdGenerator)  # safe again


def test_the_checks_still_report_it_as_a_check() -> None:
    with (
        override_settings(UID_FIELDS=unsafe_photos()),
        pytest.raises(SystemCheckError, match=r"uid_fields\.E016"),
    ):
        call_command("check", verbosity=0)


def test_an_unknown_generator_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"GENERATORS\.nope: .*no generator 'nope'") as e:
        get_generator("nope")
    assert isinstance(e.value, LookupError)  # what get_generator raised before
    with pytest.raises(ConfigurationError, match=r"SHARDS\.nope: .*no shard map 'nope'") as e:
        get_shard_map("nope", "default")
    assert isinstance(e.value, LookupError)


def test_a_malformed_setting_is_refused_at_first_use_as_the_checks_refuse_it() -> None:
    config = copy.deepcopy(settings.UID_FIELDS)
    config["GENERATORS"]["photos"]["max_backwards_ms"] = 5  # a typo: E013
    with override_settings(UID_FIELDS=config):
        assert "uid_fields.E013" in {m.id for m in check_settings()}
        with pytest.raises(ConfigurationError, match=r"GENERATORS\.photos\.max_backwards_ms"):
            get_generator("default")
    assert get_generator("default").node == {"datacenter": 0, "worker": 1}  # type: ignore[union-attr]


@isolate_apps("tests.django.testapp")
def test_a_generator_only_a_database_uses_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """As check E016 skips it: every field of it has database_default=True, so no process
    makes its ids in Python; the generator only decodes and routes them."""

    class MadeByPostgres(models.Model):
        id = uid_fields.django.ShardedBigIntField(
            primary_key=True,
            generator="photos",
            shards="main",
            shard_key="owner_id",
            database_default=True,
        )
        owner_id = models.BigIntegerField()

        class Meta:
            app_label = "testapp"

    monkeypatch.setattr(apps, "get_models", lambda *args, **kwargs: [MadeByPostgres])
    with override_settings(UID_FIELDS=unsafe_photos()):
        assert "uid_fields.E016" not in {m.id for m in check_settings()}
        assert isinstance(get_generator("photos"), ShardedIdGenerator)
