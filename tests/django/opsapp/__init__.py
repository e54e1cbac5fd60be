"""A test app whose every model lives on the shards.

Its migrations are run again with other migration modules in
``tests/django/test_migration_state.py`` (``MIGRATION_MODULES``): a data migration that
touches every shard's rows, and one that fails on one shard.
"""
