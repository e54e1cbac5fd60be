"""env.py of a sharded project: every shard database migrated in turn."""

from alembic import context

from tests.sqlalchemy.models import Base
from uid_fields.sqlalchemy.alembic import run_migrations_on_shards

attributes = context.config.attributes
run_migrations_on_shards(
    context,
    attributes["engines"],
    shard_map=attributes.get("shard_map"),
    target_metadata=Base.metadata,
)
