import django.db.models.deletion
from django.db import migrations, models

import uid_fields.django


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("testapp", "0006_ranked"),
    ]

    operations = [
        migrations.CreateModel(
            name="Bookmark",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("object_id", models.CharField(max_length=40)),
                ("label", models.CharField(blank=True, max_length=50)),
                (
                    "content_type",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="contenttypes.contenttype"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="Remark",
            fields=[
                ("id", uid_fields.django.SnowflakeField(primary_key=True, serialize=False)),
                ("text", models.CharField(blank=True, max_length=50)),
                (
                    "purchase",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="remarks",
                        to="testapp.purchase",
                    ),
                ),
            ],
        ),
    ]
