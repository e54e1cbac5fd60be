"""A data migration that fails on one shard only (as one bad row would)."""

from typing import Any

from django.db import migrations


def check_rows(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.alias == "shard_1":
        raise RuntimeError("a row of shard_1 cannot be converted")


class Migration(migrations.Migration):
    dependencies = [("opsapp", "0001_initial")]

    operations = [migrations.RunPython(check_rows, migrations.RunPython.noop)]
