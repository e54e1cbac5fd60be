from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("testapp", "0007_queries_cross_database"),
        ("testapp", "0007_relations_remark_bookmark"),
    ]

    operations = []
