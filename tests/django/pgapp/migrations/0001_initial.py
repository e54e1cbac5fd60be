from django.db import migrations, models

import uid_fields.django
from uid_fields.django.operations import InstallNextId


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        InstallNextId(generator="photos", shards="main"),
        migrations.CreateModel(
            name="DbPhoto",
            fields=[
                (
                    "id",
                    uid_fields.django.ShardedBigIntField(
                        database_default=True,
                        generator="photos",
                        primary_key=True,
                        serialize=False,
                        shard_key="owner_id",
                        shards="main",
                    ),
                ),
                ("owner_id", models.BigIntegerField()),
            ],
        ),
    ]
