"""Django's documented data-migration pattern, written as its docs write it: the model
from the historical registry, the rows of the database being migrated, no hints."""

from typing import Any

from django.db import migrations


def shout(apps: Any, schema_editor: Any) -> None:
    ledger = apps.get_model("opsapp", "Ledger")
    db_alias = schema_editor.connection.alias
    for row in ledger.objects.using(db_alias).all():
        row.note = row.note.upper()
        row.save()


class Migration(migrations.Migration):
    dependencies = [("opsapp", "0001_initial")]

    operations = [migrations.RunPython(shout, migrations.RunPython.noop)]
