"""The lease table's state marker, dated 0: no lease can be older than the table.

Claims on a table whose marker is missing (its rows were deleted) wait out a quarantine
(``uid_fields.leases.database``); this row spares a table made by ``migrate`` that wait.
"""

from typing import Any

from django.db import migrations

from uid_fields.ids.leases.database import marker_row


def insert_marker(apps: Any, schema_editor: Any) -> None:
    lease = apps.get_model("uid_fields", "WorkerLease")
    row = marker_row()
    lease.objects.using(schema_editor.connection.alias).get_or_create(
        name=row["name"], node=row["node"], defaults=row
    )


class Migration(migrations.Migration):
    dependencies = [("uid_fields", "0001_initial")]

    operations = [
        migrations.RunPython(
            insert_marker, migrations.RunPython.noop, hints={"model_name": "workerlease"}
        )
    ]
