from django.db import migrations, models

import uid_fields.django


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="Ledger",
            fields=[
                (
                    "id",
                    uid_fields.django.SnowflakeField(
                        primary_key=True, serialize=False, shards="main"
                    ),
                ),
                ("note", models.CharField(max_length=100)),
            ],
        ),
    ]
