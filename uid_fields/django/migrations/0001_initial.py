"""The worker-id lease table (uid_fields.django.leases.database_lease)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="WorkerLease",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=100)),
                ("node", models.IntegerField()),
                ("token", models.CharField(blank=True, max_length=200, null=True)),
                ("expires_ms", models.BigIntegerField(default=0)),
                ("claimed_ms", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "uid_fields_worker_lease",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("name", "node"), name="uid_fields_worker_lease_name_node"
                    )
                ],
            },
        ),
    ]
