from django.db import migrations


class Migration(migrations.Migration):
    """The test models that four branches of work added side by side."""

    dependencies = [
        ("testapp", "0007_queries_cross_database"),
        ("testapp", "0007_relations_remark_bookmark"),
        ("testapp", "0007_unique_workspaces"),
        ("testapp", "0007_families_tenant_family"),
    ]

    operations = []
