import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import uid_fields.django


class Migration(migrations.Migration):
    dependencies = [
        ("testapp", "0006_ranked"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Board",
            fields=[
                (
                    "id",
                    uid_fields.django.SnowflakeField(
                        primary_key=True, serialize=False, shards="main"
                    ),
                ),
                ("name", models.CharField(max_length=50)),
                (
                    "owner",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="Card",
            fields=[
                (
                    "id",
                    uid_fields.django.SnowflakeField(
                        primary_key=True, serialize=False, shards="main"
                    ),
                ),
                ("title", models.CharField(max_length=50)),
                (
                    "board",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="cards",
                        to="testapp.board",
                    ),
                ),
                (
                    "coupon",
                    models.ForeignKey(
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="testapp.coupon",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="CardCover",
            fields=[
                (
                    "id",
                    uid_fields.django.SnowflakeField(
                        primary_key=True, serialize=False, shards="main"
                    ),
                ),
                ("color", models.CharField(blank=True, max_length=20)),
                (
                    "card",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="cover",
                        to="testapp.card",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="CardStep",
            fields=[
                (
                    "id",
                    uid_fields.django.ShardedBigIntField(
                        generator="photos",
                        primary_key=True,
                        serialize=False,
                        shard_key="card",
                        shards="main",
                    ),
                ),
                ("label", models.CharField(blank=True, max_length=20)),
                (
                    "card",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="testapp.card",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="Memo",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("text", models.CharField(blank=True, max_length=50)),
                (
                    "board",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="memos",
                        to="testapp.board",
                    ),
                ),
            ],
        ),
    ]
