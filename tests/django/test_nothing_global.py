"""Installing the app changes nothing for models that are not sharded (issue 36, items
1 and 2): Django's collector, the admin's ``NestedObjects``, connections without execute
wrappers, no model signal receiver for a plain model; and no behaviour depends on the
call stack (no frame inspection anywhere in the package)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.versions

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "uid_fields"


def _start_django() -> dict[str, Any]:
    """A fresh process: the app installed, no sharded model, SQLite in memory."""
    script = textwrap.dedent(
        """
        import json

        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=[
                "django.contrib.contenttypes",
                "django.contrib.auth",
                "django.contrib.admin",
                "uid_fields.django",
            ],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        )
        django.setup()

        from django.contrib.admin import utils as admin_utils
        from django.contrib.auth.models import Group, User
        from django.db import connection
        from django.db.models import base, deletion, query
        from django.db.models.signals import m2m_changed, post_save, pre_delete, pre_save

        connection.ensure_connection()
        receivers = {}
        for name, signal in {
            "pre_save": pre_save, "post_save": post_save,
            "pre_delete": pre_delete, "m2m_changed": m2m_changed,
        }.items():
            found = []
            for sender in (User, Group, User.groups.through):
                for receiver in signal._live_receivers(sender)[0]:
                    module = getattr(receiver, "__module__", "") or ""
                    if module.startswith("uid_fields"):
                        found.append(f"{module}.{receiver.__qualname__}")
            receivers[name] = found
        print(json.dumps({
            "base_collector": base.Collector is deletion.Collector,
            "query_collector": query.Collector is deletion.Collector,
            "nested_objects": admin_utils.NestedObjects.__module__,
            "execute_wrappers": [repr(w) for w in connection.execute_wrappers],
            "receivers": receivers,
        }))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_without_a_sharded_model_django_is_left_as_it_is() -> None:
    seen = _start_django()
    assert seen["base_collector"], "django.db.models.base.Collector was replaced"
    assert seen["query_collector"], "django.db.models.query.Collector was replaced"
    assert seen["nested_objects"] == "django.contrib.admin.utils"
    assert seen["execute_wrappers"] == []
    assert seen["receivers"] == {
        "pre_save": [],
        "post_save": [],
        "pre_delete": [],
        "m2m_changed": [],
    }


#: Frame inspection in any form: the package decides nothing by who is calling.
STACK_READS = re.compile(r"_getframe|inspect\.stack|currentframe|inspect\.trace|f_back|\.f_code")


def test_no_behaviour_reads_the_call_stack() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if STACK_READS.search(line)
    ]
    assert found == []


def test_with_sharded_models_only_they_get_the_write_checks() -> None:
    """In the test project (sharded models): the checks are bound to the models whose
    rows live on shards, also to one defined after the app was ready; a plain model of
    the same project sends its signals to no receiver of uid_fields."""
    from django.contrib.auth.models import User
    from django.db import models
    from django.db.models.signals import pre_save
    from django.test.utils import isolate_apps

    from tests.django.testapp.models import Order, OrderLine
    from uid_fields.django import ShardedManager, SnowflakeField

    def ours(sender: type[Any]) -> list[str]:
        return [
            r.__qualname__
            for r in pre_save._live_receivers(sender)[0]  # type: ignore[attr-defined]
            if (getattr(r, "__module__", "") or "").startswith("uid_fields")
        ]

    assert ours(Order) == ["_ModelWriteChecks.on_save"]
    assert ours(OrderLine) == ["_ModelWriteChecks.on_save"]  # a follower
    assert ours(User) == []

    with isolate_apps("tests.django.testapp"):

        class Late(models.Model):
            id = SnowflakeField(primary_key=True, shards="main")
            objects = ShardedManager()

            class Meta:
                app_label = "testapp"

        class LatePlain(models.Model):
            class Meta:
                app_label = "testapp"

        assert ours(Late) == ["_ModelWriteChecks.on_save"]
        assert ours(LatePlain) == []
