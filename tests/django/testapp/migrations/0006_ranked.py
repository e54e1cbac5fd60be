from django.db import migrations, models

import uid_fields.django


class Migration(migrations.Migration):
    dependencies = [
        ("testapp", "0005_stamp"),
    ]

    operations = [
        migrations.CreateModel(
            name="Ranked",
            fields=[
                (
                    "id",
                    uid_fields.django.ShardedBigIntField(
                        generator="photos",
                        primary_key=True,
                        serialize=False,
                        shard_key="bucket",
                        shards="main",
                    ),
                ),
                ("bucket", models.BigIntegerField()),
                ("rank", models.IntegerField(null=True)),
                ("name", models.CharField(max_length=20)),
            ],
        ),
    ]
